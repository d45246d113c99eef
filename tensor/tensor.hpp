// The one tensor type: a shape, an element type and a device over bytes that a tensor owns or a
// view borrows. Layers above keep activations, parameters, gradients and transfers in it, so a
// new dtype (bf16, fp16, fp8) or a new device (CUDA) is one more case in a kernel's dispatch, not
// one more copy of every layer. A tensor owns its bytes alone (move-only; clone() copies);
// views are cheap, non-owning and must not outlive what they view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/half_float.hpp"
#include "tensor/memory_ledger.hpp"

namespace mactor::tensor {

using shape_type = std::vector<std::int64_t>;
/// Product of the extents (1 for a 0-d shape).
std::int64_t numel_of(const shape_type& shape);
/// "[2, 3, 4]".
std::string to_string(const shape_type& shape);

/// The dtype of a C++ element type (the 8-bit types come with their kernels).
template <class T>
constexpr dtype dtype_of();
template <>
constexpr dtype dtype_of<float>() { return dtype::float32; }
template <>
constexpr dtype dtype_of<double>() { return dtype::float64; }
template <>
constexpr dtype dtype_of<bfloat16>() { return dtype::bfloat16; }
template <>
constexpr dtype dtype_of<float16>() { return dtype::float16; }

/// A use of a tensor as the wrong type or on the wrong device: names both.
class tensor_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void throw_mismatch(dtype have, device where, dtype want);
}

/// A borrowed tensor (mutable elements).
struct tensor_view {
  void* data = nullptr;
  shape_type shape;
  dtype type = dtype::float32;
  device where = cpu;

  std::int64_t numel() const { return numel_of(shape); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * size_of(type); }
  /// The elements as T on the host; throws tensor_error unless type is dtype_of<T>() and the view is on the CPU.
  template <class T>
  std::span<T> host() const {
    if (type != dtype_of<T>() || where != cpu) detail::throw_mismatch(type, where, dtype_of<T>());
    return {static_cast<T*>(data), static_cast<std::size_t>(numel())};
  }
  /// Rows [begin, end) of the first dimension.
  tensor_view rows(std::int64_t begin, std::int64_t end) const;
};

/// A borrowed tensor (read-only elements); every tensor_view converts to one.
struct const_tensor_view {
  const void* data = nullptr;
  shape_type shape;
  dtype type = dtype::float32;
  device where = cpu;

  const_tensor_view() = default;
  const_tensor_view(const void* d, shape_type s, dtype t, device w = cpu) : data(d), shape(std::move(s)), type(t), where(w) {}
  const_tensor_view(const tensor_view& v) : data(v.data), shape(v.shape), type(v.type), where(v.where) {}

  std::int64_t numel() const { return numel_of(shape); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * size_of(type); }
  template <class T>
  std::span<const T> host() const {
    if (type != dtype_of<T>() || where != cpu) detail::throw_mismatch(type, where, dtype_of<T>());
    return {static_cast<const T*>(data), static_cast<std::size_t>(numel())};
  }
  const_tensor_view rows(std::int64_t begin, std::int64_t end) const;
};

/// A view of host memory the caller owns, e.g. a std::vector's elements, as a 1-d tensor.
template <class T>
tensor_view view_of(std::span<T> elements) {
  return {elements.data(), {static_cast<std::int64_t>(elements.size())}, dtype_of<T>(), cpu};
}
template <class T>
const_tensor_view view_of(std::span<const T> elements) {
  return {elements.data(), {static_cast<std::int64_t>(elements.size())}, dtype_of<T>(), cpu};
}

/// An owning tensor. Host tensors of 1 MiB and more sit in huge pages (tensor/host_buffer.hpp),
/// since the data plane moves them, except activations, which stay on the rank (plain 64-byte
/// aligned memory); every byte is counted in the device's memory ledger under the tensor's
/// memory_kind.
class tensor {
 public:
  tensor() = default;
  /// Zero-filled. Throws tensor_error for a device that is not built in.
  tensor(shape_type shape, dtype type, memory_kind kind, device where = cpu);
  ~tensor();
  tensor(tensor&& other) noexcept;
  tensor& operator=(tensor&& other) noexcept;
  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;

  /// A copy with its own bytes (same kind).
  tensor clone() const;

  /// False for a default-constructed (or moved-from) tensor, which has shape [0].
  bool defined() const { return data_ != nullptr; }
  const shape_type& shape() const { return shape_; }
  dtype type() const { return type_; }
  device where() const { return where_; }
  memory_kind kind() const { return kind_; }
  std::int64_t numel() const { return numel_of(shape_); }
  std::size_t nbytes() const { return bytes_; }
  void* data() { return data_; }
  const void* data() const { return data_; }

  tensor_view view() { return {data_, shape_, type_, where_}; }
  const_tensor_view view() const { return {data_, shape_, type_, where_}; }
  operator tensor_view() { return view(); }
  operator const_tensor_view() const { return view(); }
  template <class T>
  std::span<T> host() { return view().host<T>(); }
  template <class T>
  std::span<const T> host() const { return view().host<T>(); }

  /// Same elements, another shape of the same numel.
  void reshape(shape_type shape);
  void zero();

 private:
  void release() noexcept;

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  shape_type shape_{0};
  dtype type_ = dtype::float32;
  device where_ = cpu;
  memory_kind kind_ = memory_kind::other;
};

}  // namespace mactor::tensor
