// The CUDA backend as a module (libmactor_cuda_backend.so) that a program loads when a run asks
// for a GPU (tensor/device_backend.hpp). It holds the CUDA kernels, the device allocator and the
// CUDA runtime and cuBLASLt links; the registries it fills are the program's own, which the
// program exports, so none of mactor's host libraries are linked in here.
#include <stdexcept>
#include <string>

#include "kernels/cuda/tensor_kernels.hpp"
#include "tensor/cuda/device.hpp"

/// Registers CUDA memory and kernels (once) and checks device `index` is there; throws
/// std::runtime_error saying why not.
extern "C" __attribute__((visibility("default"))) void mactor_cuda_backend_register(int index) {
  const int count = mactor::cuda::device_count();
  if (count == 0)
    throw std::runtime_error("no CUDA device can be used (" + mactor::cuda::no_device_reason() +
                             "): run on a machine with an NVIDIA GPU, or on the host with MACTOR_DEVICE=cpu");
  if (index < 0 || index >= count)
    throw std::runtime_error("this rank's local rank asks for CUDA device " + std::to_string(index) + ", but " +
                             std::to_string(count) + " are visible: start at most " + std::to_string(count) +
                             " ranks per node (mactor -np), or make more GPUs visible (CUDA_VISIBLE_DEVICES)");
  mactor::kernels::cuda::enable_cuda_backend();
}
