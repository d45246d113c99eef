// Device detection and the CUDA error check.
#include "tensor/cuda/device.hpp"

#include <cuda_runtime_api.h>

namespace mactor::cuda {

void detail::check(int code, const char* what) {
  if (code == cudaSuccess) return;
  const auto err = static_cast<cudaError_t>(code);
  throw cuda_error(std::string(what) + ": " + cudaGetErrorString(err) + " (" + std::to_string(code) + ")");
}

namespace {
cudaError_t count_devices(int& count) {
  count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls do not report it
    count = 0;
  }
  return err;
}
}  // namespace

int device_count() {
  int count = 0;
  count_devices(count);
  return count;
}

std::string no_device_reason() {
  int count = 0;
  const cudaError_t err = count_devices(count);
  if (err != cudaSuccess)
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err) + " (" + std::to_string(int(err)) + ")";
  return count == 0 ? "cudaGetDeviceCount: 0 devices" : "";
}

void set_device(int index) { detail::check(cudaSetDevice(index), "cudaSetDevice"); }

std::string describe_device(int index) {
  cudaDeviceProp prop{};
  detail::check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major * 10 + prop.minor) + ", " +
         std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

}  // namespace mactor::cuda
