// Moving elements between the host's memory and a device's: what a model on a device needs at
// its edges (the initial parameter values, the token ids and labels in, the per-token losses out)
// and what a test needs to read a device tensor. Each copy is done when it returns.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::tensor {

/// Copies src's elements into dst: the same dtype and element count, from the host to a device,
/// from a device to the host, or within one device or the host. Throws tensor_error naming both
/// views otherwise.
void copy_between(tensor_view dst, const_tensor_view src);

/// A copy of src (its shape, dtype and elements) on `where`, counted under `kind`.
tensor copy_to(const_tensor_view src, device where, memory_kind kind);

/// src's elements in host memory as T (T must be src's dtype), from wherever src is.
template <class T>
std::vector<T> host_copy(const_tensor_view src) {
  std::vector<T> out(static_cast<std::size_t>(src.numel()));
  if (src.type != dtype_of<T>()) detail::throw_mismatch(src.type, src.where, dtype_of<T>());
  copy_between(view_of(std::span<T>(out)), src);
  return out;
}

/// Integers a device kernel reads through a pointer (token ids, labels, document starts), held
/// in a device's memory; on the host, a copy in host memory. Move-only.
class index_array {
 public:
  index_array() = default;
  /// A copy of `values` on `where`.
  index_array(std::span<const std::int32_t> values, device where);
  ~index_array();
  index_array(index_array&& other) noexcept;
  index_array& operator=(index_array&& other) noexcept;
  index_array(const index_array&) = delete;
  index_array& operator=(const index_array&) = delete;

  /// Null when empty.
  const std::int32_t* data() const { return where_.type == device_type::cpu ? host_.data() : device_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  void release() noexcept;
  std::vector<std::int32_t> host_;
  std::int32_t* device_ = nullptr;
  std::size_t size_ = 0;
  device where_ = cpu;
};

}  // namespace mactor::tensor
