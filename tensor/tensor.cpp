// Tensors and views: allocation on the host (the GPU backend adds CUDA's), counting, checks.
#include "tensor/tensor.hpp"

#include <cstring>
#include <new>
#include <utility>

#include "tensor/block_cache.hpp"
#include "tensor/device_memory.hpp"
#include "tensor/host_buffer.hpp"
#include "tensor/memory_history.hpp"

namespace mactor::tensor {

std::int64_t numel_of(const shape_type& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string to_string(const shape_type& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void detail::throw_mismatch(dtype have, device where, dtype want) {
  throw tensor_error("a " + std::string(short_name(have)) + " tensor on " + to_string(where) + " used as " +
                     std::string(short_name(want)) + " on the host");
}

namespace {

shape_type row_shape(const shape_type& shape, std::int64_t begin, std::int64_t end) {
  if (shape.empty() || begin < 0 || end < begin || end > shape[0])
    throw tensor_error("rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") of a tensor of shape " +
                       to_string(shape));
  shape_type s = shape;
  s[0] = end - begin;
  return s;
}

std::size_t row_bytes(const shape_type& shape, dtype type) {
  return static_cast<std::size_t>(numel_of(shape) / (shape[0] ? shape[0] : 1)) * size_of(type);
}

}  // namespace

tensor_view tensor_view::rows(std::int64_t begin, std::int64_t end) const {
  return {static_cast<std::byte*>(data) + begin * row_bytes(shape, type), row_shape(shape, begin, end), type, where};
}

const_tensor_view const_tensor_view::rows(std::int64_t begin, std::int64_t end) const {
  return {static_cast<const std::byte*>(data) + begin * row_bytes(shape, type), row_shape(shape, begin, end), type,
          where};
}

namespace {

// Activations stay on the rank (the pipeline sends copies from its own buffers): they get plain
// 64-byte-aligned memory from the block cache, not huge pages, whose 2 MiB rounding would cost a
// layer's many buffers real memory. Everything else may be moved by the data plane and takes huge
// pages when large.
bool huge_page_kind(memory_kind kind) { return kind != memory_kind::activations; }

void* allocate_bytes(std::size_t bytes, memory_kind kind) {
  if (huge_page_kind(kind)) return huge_page_allocator<std::byte>().allocate(bytes);
  return take_activation_block(bytes);
}

void free_bytes(void* data, std::size_t bytes, memory_kind kind) noexcept {
  if (huge_page_kind(kind))
    huge_page_allocator<std::byte>().deallocate(static_cast<std::byte*>(data), bytes);
  else
    give_back_activation_block(data, bytes);
}

}  // namespace

tensor::tensor(shape_type shape, dtype type, memory_kind kind, device where)
    : shape_(std::move(shape)), type_(type), where_(where), kind_(kind) {
  for (auto d : shape_)
    if (d < 0) throw tensor_error("a tensor of negative shape " + to_string(shape_));
  const auto bytes = static_cast<std::size_t>(numel_of(shape_)) * size_of(type_);
  if (where_.type != device_type::cpu) {
    // Device memory is counted by the device's caching allocator, not the host ledger.
    const auto& memory = memory_of(where_);
    if (bytes == 0) return;
    data_ = memory.allocate(where_.index, bytes);
    bytes_ = bytes;
    try {
      memory.fill_zero(where_.index, data_, bytes_);
    } catch (...) {
      release();
      throw;
    }
    return;
  }
  bytes_ = bytes;
  if (bytes_ == 0) return;
  // Counted first: past the device's memory nothing is allocated.
  memory_ledger::host().allocated(kind_, static_cast<std::int64_t>(bytes_));
  try {
    data_ = allocate_bytes(bytes_, kind_);
  } catch (...) {
    memory_ledger::host().freed(kind_, static_cast<std::int64_t>(bytes_));
    bytes_ = 0;
    throw;
  }
  std::memset(data_, 0, bytes_);
  record_memory_event(true, data_, static_cast<std::int64_t>(bytes_), kind_);
}

void tensor::release() noexcept {
  if (!data_) return;
  if (where_.type != device_type::cpu) {
    memory_of(where_).release(where_.index, data_);
    data_ = nullptr;
    bytes_ = 0;
    return;
  }
  record_memory_event(false, data_, static_cast<std::int64_t>(bytes_), kind_);
  free_bytes(data_, bytes_, kind_);
  memory_ledger::host().freed(kind_, static_cast<std::int64_t>(bytes_));
  data_ = nullptr;
  bytes_ = 0;
}

tensor::~tensor() { release(); }

tensor::tensor(tensor&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)),
      shape_(std::move(other.shape_)), type_(other.type_), where_(other.where_), kind_(other.kind_) {
  other.shape_ = {0};
}

tensor& tensor::operator=(tensor&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    shape_ = std::move(other.shape_);
    other.shape_ = {0};
    type_ = other.type_;
    where_ = other.where_;
    kind_ = other.kind_;
  }
  return *this;
}

tensor tensor::clone() const {
  tensor copy(shape_, type_, kind_, where_);
  if (!bytes_) return copy;
  if (where_.type != device_type::cpu) memory_of(where_).copy(where_.index, copy.data_, data_, bytes_);
  else std::memcpy(copy.data_, data_, bytes_);
  return copy;
}

void tensor::reshape(shape_type shape) {
  if (numel_of(shape) != numel())
    throw tensor_error("cannot reshape a tensor of shape " + to_string(shape_) + " to " + to_string(shape));
  shape_ = std::move(shape);
}

void tensor::zero() {
  if (!bytes_) return;
  if (where_.type != device_type::cpu) memory_of(where_).fill_zero(where_.index, data_, bytes_);
  else std::memset(data_, 0, bytes_);
}

}  // namespace mactor::tensor
