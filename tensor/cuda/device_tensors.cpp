// CUDA device memory for mactor tensors.
#include "tensor/cuda/device_tensors.hpp"

#include <cuda_runtime_api.h>

#include "tensor/cuda/current_stream.hpp"
#include "tensor/cuda/device.hpp"
#include "tensor/cuda/device_allocator.hpp"
#include "tensor/device_memory.hpp"

namespace mactor::cuda {

namespace {

void* allocate(int index, std::size_t bytes) { return device_allocator(index).allocate(bytes); }

void release(int index, void* data) noexcept { device_allocator(index).deallocate(data); }

void fill_zero(int, void* data, std::size_t bytes) {
  const auto s = current_stream();
  detail::check(cudaMemsetAsync(data, 0, bytes, s), "cudaMemsetAsync (a device tensor's zeros)");
  detail::check(cudaStreamSynchronize(s), "cudaStreamSynchronize (a device tensor's zeros)");
}

void copy(int, void* dst, const void* src, std::size_t bytes) {
  const auto s = current_stream();
  detail::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync (a device tensor's clone)");
  detail::check(cudaStreamSynchronize(s), "cudaStreamSynchronize (a device tensor's clone)");
}

void upload(int, void* dst, const void* host_src, std::size_t bytes) {
  const auto s = current_stream();
  detail::check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (host to device)");
  detail::check(cudaStreamSynchronize(s), "cudaStreamSynchronize (host to device)");
}

void download(int, void* host_dst, const void* src, std::size_t bytes) {
  const auto s = current_stream();
  detail::check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (device to host)");
  detail::check(cudaStreamSynchronize(s), "cudaStreamSynchronize (device to host)");
}

tensor::allocator_stats stats(int index) { return device_allocator(index).stats(); }

}  // namespace

void enable_device_tensors() {
  static const bool registered = [] {
    tensor::register_device_memory(tensor::device_type::cuda, {allocate, release, fill_zero, copy, upload, download, stats});
    return true;
  }();
  (void)registered;
}

}  // namespace mactor::cuda
