// Host <-> device copies through the device's registered memory functions.
#include "tensor/transfer.hpp"

#include <cstring>
#include <utility>

#include "tensor/device_memory.hpp"

namespace mactor::tensor {

namespace {
std::string describe(const const_tensor_view& v) {
  return std::string(short_name(v.type)) + " " + to_string(v.shape) + " on " + to_string(v.where);
}
}  // namespace

void copy_between(tensor_view dst, const_tensor_view src) {
  if (dst.type != src.type || dst.numel() != src.numel())
    throw tensor_error("copy_between: " + describe(src) + " into " + describe(dst) +
                       " (the dtype and the element count must match)");
  const std::size_t bytes = src.nbytes();
  if (bytes == 0) return;
  const bool dst_host = dst.where == cpu, src_host = src.where == cpu;
  if (dst_host && src_host) {
    std::memcpy(dst.data, src.data, bytes);
  } else if (src_host) {
    memory_of(dst.where).upload(dst.where.index, dst.data, src.data, bytes);
  } else if (dst_host) {
    memory_of(src.where).download(src.where.index, dst.data, src.data, bytes);
  } else if (dst.where == src.where) {
    memory_of(dst.where).copy(dst.where.index, dst.data, src.data, bytes);
  } else {
    throw tensor_error("copy_between: " + describe(src) + " into " + describe(dst) +
                       " (between two devices: copy through the host, or use the collective that moves it)");
  }
}

tensor copy_to(const_tensor_view src, device where, memory_kind kind) {
  tensor out(src.shape, src.type, kind, where);
  copy_between(out, src);
  return out;
}

index_array::index_array(std::span<const std::int32_t> values, device where) : size_(values.size()), where_(where) {
  if (where_ == cpu) {
    host_.assign(values.begin(), values.end());
    return;
  }
  if (values.empty()) return;
  const auto& memory = memory_of(where_);
  device_ = static_cast<std::int32_t*>(memory.allocate(where_.index, values.size_bytes()));
  try {
    memory.upload(where_.index, device_, values.data(), values.size_bytes());
  } catch (...) {
    release();
    throw;
  }
}

index_array::~index_array() { release(); }

index_array::index_array(index_array&& other) noexcept
    : host_(std::move(other.host_)), device_(std::exchange(other.device_, nullptr)),
      size_(std::exchange(other.size_, 0)), where_(other.where_) {}

index_array& index_array::operator=(index_array&& other) noexcept {
  if (this != &other) {
    release();
    host_ = std::move(other.host_);
    device_ = std::exchange(other.device_, nullptr);
    size_ = std::exchange(other.size_, 0);
    where_ = other.where_;
  }
  return *this;
}

void index_array::release() noexcept {
  if (device_) memory_of(where_).release(where_.index, device_);
  device_ = nullptr;
}

}  // namespace mactor::tensor
