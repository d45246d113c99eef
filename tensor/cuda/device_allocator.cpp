// The per-device caching allocators and device_buffer.
#include "tensor/cuda/device_allocator.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tensor/cuda/device.hpp"

namespace mactor::cuda {

namespace {

// cudaMalloc on device `index` (the calling thread's current device is restored afterwards).
tensor::allocator_backing cuda_backing(int index) {
  auto on_device = [index](auto&& call) {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(index);
    call();
    cudaSetDevice(previous);
  };
  return {[on_device](std::size_t bytes) {
            void* block = nullptr;
            on_device([&] {
              if (cudaMalloc(&block, bytes) != cudaSuccess) {
                cudaGetLastError();  // out of memory is not sticky; clear it for the retry
                block = nullptr;
              }
            });
            return block;
          },
          [on_device](void* block) { on_device([&] { cudaFree(block); }); }};
}

}  // namespace

tensor::caching_allocator& device_allocator(int index) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<tensor::caching_allocator>> allocators;
  std::lock_guard lock(mutex);
  static const int count = device_count();  // devices do not come and go during a run
  if (index < 0 || index >= count)
    throw cuda_error("device_allocator: no CUDA device " + std::to_string(index) + " (" + std::to_string(count) +
                     " found)");
  if (allocators.size() < std::size_t(count)) allocators.resize(count);
  if (!allocators[index]) allocators[index] = std::make_unique<tensor::caching_allocator>(cuda_backing(index));
  return *allocators[index];
}

device_buffer::device_buffer(tensor::shape_type shape, tensor::dtype type, int index)
    : shape_(std::move(shape)), type_(type), index_(index) {
  data_ = device_allocator(index).allocate(nbytes());
}

device_buffer::~device_buffer() {
  if (data_) device_allocator(index_).deallocate(data_);
}

device_buffer::device_buffer(device_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), shape_(std::move(other.shape_)), type_(other.type_),
      index_(other.index_) {}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(shape_, other.shape_);
  std::swap(type_, other.type_);
  std::swap(index_, other.index_);
  return *this;
}

}  // namespace mactor::cuda
