// Device memory: one caching allocator per CUDA device (backed by cudaMalloc/cudaFree), and
// device_buffer, an owning block of it seen as a mactor tensor view.
#pragma once

#include <cstddef>

#include "tensor/caching_allocator.hpp"
#include "tensor/tensor.hpp"

namespace mactor::cuda {

/// The caching allocator of device `index` (created on first use, lives until exit).
tensor::caching_allocator& device_allocator(int index);

/// An owning, uninitialized device tensor from device_allocator(index).
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(tensor::shape_type shape, tensor::dtype type, int index = 0);
  ~device_buffer();
  device_buffer(device_buffer&& other) noexcept;
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const { return static_cast<T*>(data_); }
  std::size_t nbytes() const { return view().nbytes(); }
  tensor::tensor_view view() const { return {data_, shape_, type_, {tensor::device_type::cuda, index_}}; }
  operator tensor::tensor_view() const { return view(); }
  operator tensor::const_tensor_view() const { return view(); }

 private:
  void* data_ = nullptr;
  tensor::shape_type shape_{0};
  tensor::dtype type_ = tensor::dtype::float32;
  int index_ = 0;
};

}  // namespace mactor::cuda
