// Floating-point conversions, and the fp32 staging of 16-bit tensors for the CPU kernels.
#include "kernels/convert.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>
#include <string>

#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"
#include "tensor/memory_ledger.hpp"

namespace mactor::kernels {
namespace {

constexpr std::int64_t parallel_threshold = 1 << 16;

template <class To, class From, class F>
void elementwise(To* dst, const From* src, std::int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n > parallel_threshold)
  for (std::int64_t i = 0; i < n; ++i) dst[i] = f(src[i]);
}

bool convertible(tensor::dtype t) {
  return t == tensor::dtype::float32 || t == tensor::dtype::float64 ||
         t == tensor::dtype::bfloat16 || t == tensor::dtype::float16;
}

// src as fp32 (exact for 16-bit and fp32; rounded for fp64).
void to_float(float* dst, const tensor::const_tensor_view& src, std::int64_t n) {
  switch (src.type) {
    case tensor::dtype::float32: std::memcpy(dst, src.data, std::size_t(n) * sizeof(float)); return;
    case tensor::dtype::float64:
      elementwise(dst, static_cast<const double*>(src.data), n, [](double v) { return float(v); });
      return;
    case tensor::dtype::bfloat16:
      widen_to_float(dst, static_cast<const tensor::bfloat16*>(src.data), n);
      return;
    case tensor::dtype::float16:
      widen_to_float(dst, static_cast<const tensor::float16*>(src.data), n);
      return;
    default: return;
  }
}

}  // namespace

void widen_to_float(float* dst, const tensor::bfloat16* src, std::int64_t n) {
  elementwise(dst, src, n, [](tensor::bfloat16 v) { return tensor::to_float(v); });
}
void widen_to_float(float* dst, const tensor::float16* src, std::int64_t n) {
  elementwise(dst, src, n, [](tensor::float16 v) { return tensor::to_float(v); });
}
void round_from_float(tensor::bfloat16* dst, const float* src, std::int64_t n) {
  elementwise(dst, src, n, [](float v) { return tensor::to_bfloat16(v); });
}
void round_from_float(tensor::float16* dst, const float* src, std::int64_t n) {
  elementwise(dst, src, n, [](float v) { return tensor::to_float16(v); });
}

void convert(tensor::tensor_view dst, tensor::const_tensor_view src) {
  if (dst.where != src.where)
    throw tensor::tensor_error("kernel convert: from " + tensor::to_string(src.where) + " to " +
                               tensor::to_string(dst.where) + " (one device; copies between devices are the backend's)");
  if (dst.numel() != src.numel())
    throw tensor::tensor_error("kernel convert: " + std::to_string(src.numel()) +
                               " elements into " + std::to_string(dst.numel()));
  if (on_device(dst)) return device_kernels_for("convert", dst).convert(dst, src);
  const std::int64_t n = src.numel();
  if (dst.type == src.type) {
    std::memcpy(dst.data, src.data, dst.nbytes());
    return;
  }
  if (!convertible(dst.type) || !convertible(src.type))
    throw tensor::tensor_error(std::string("kernel convert has no conversion from ") +
                               std::string(tensor::short_name(src.type)) + " to " +
                               std::string(tensor::short_name(dst.type)));
  if (dst.type == tensor::dtype::float64 && src.type == tensor::dtype::float32) {
    elementwise(static_cast<double*>(dst.data), static_cast<const float*>(src.data), n,
                [](float v) { return double(v); });
    return;
  }
  if (dst.type == tensor::dtype::float64) {  // from 16 bits: exact through fp32
    std::vector<float> wide(static_cast<std::size_t>(n));
    to_float(wide.data(), src, n);
    elementwise(static_cast<double*>(dst.data), wide.data(), n, [](float v) { return double(v); });
    return;
  }
  if (dst.type == tensor::dtype::float32) {
    to_float(static_cast<float*>(dst.data), src, n);
    return;
  }
  // To 16 bits: from fp32 directly, else through fp32 (fp64 rounds twice, as torch's does).
  std::vector<float> wide;
  const float* from = static_cast<const float*>(src.data);
  if (src.type != tensor::dtype::float32) {
    wide.resize(static_cast<std::size_t>(n));
    to_float(wide.data(), src, n);
    from = wide.data();
  }
  if (dst.type == tensor::dtype::bfloat16)
    round_from_float(static_cast<tensor::bfloat16*>(dst.data), from, n);
  else
    round_from_float(static_cast<tensor::float16*>(dst.data), from, n);
}

void round_through(tensor::tensor_view x, tensor::dtype type) {
  if (type == tensor::dtype::float32 || type == tensor::dtype::float64) return;
  if (on_device(x)) return device_kernels_for("round_through", x).round_through(x, type);
  float* v = x.host<float>().data();
  const std::int64_t n = x.numel();
  if (type == tensor::dtype::bfloat16)
    elementwise(v, v, n, [](float f) { return tensor::to_float(tensor::to_bfloat16(f)); });
  else if (type == tensor::dtype::float16)
    elementwise(v, v, n, [](float f) { return tensor::to_float(tensor::to_float16(f)); });
  else
    throw tensor::tensor_error(std::string("kernel round_through: to ") + std::string(tensor::short_name(type)) +
                               " (bf16, fp16, fp32 or fp64)");
}

void check_compatible(const char* kernel, std::initializer_list<tensor::const_tensor_view> views) {
  const tensor::const_tensor_view* first = nullptr;
  for (const auto& v : views)
    if (v.data) {
      first = &v;
      break;
    }
  if (!first) return;
  const auto wide = [](tensor::dtype t) { return t == tensor::dtype::float64; };
  for (const auto& v : views)
    if (v.data && (wide(v.type) != wide(first->type) || v.where != first->where))
      throw tensor::tensor_error(std::string("kernel ") + kernel + " got a " +
                                 std::string(tensor::short_name(v.type)) + " tensor on " +
                                 tensor::to_string(v.where) + " beside a " +
                                 std::string(tensor::short_name(first->type)) + " one on " +
                                 tensor::to_string(first->where));
}

namespace detail {
namespace {

// fp32 scratch reused by this thread's kernel calls: a step's staging would otherwise allocate
// (and fault in) the same large buffers again and again. Its bytes are counted in the host
// ledger as "other" for as long as they are held (pooled or in use).
struct scratch {
  std::unique_ptr<float[]> data;
  std::size_t capacity = 0;
};
struct scratch_list : std::vector<scratch> {
  ~scratch_list() {
    for (const auto& s : *this)
      tensor::memory_ledger::host().freed(tensor::memory_kind::other, std::int64_t(s.capacity * sizeof(float)));
  }
};
thread_local scratch_list scratch_pool;
constexpr std::size_t scratch_pool_limit = 16;

float* acquire_scratch(std::size_t n, std::size_t& capacity) {
  auto best = scratch_pool.end();
  for (auto it = scratch_pool.begin(); it != scratch_pool.end(); ++it)
    if (it->capacity >= n && (best == scratch_pool.end() || it->capacity < best->capacity)) best = it;
  if (best == scratch_pool.end()) {
    capacity = n;
    tensor::memory_ledger::host().allocated(tensor::memory_kind::other, std::int64_t(n * sizeof(float)));
    return new float[n];  // uninitialized: always written before it is read
  }
  capacity = best->capacity;
  float* data = best->data.release();
  scratch_pool.erase(best);
  return data;
}

void release_scratch(float* data, std::size_t capacity) {
  if (scratch_pool.size() >= scratch_pool_limit) {
    // Drop the smallest: large buffers are the ones worth keeping.
    auto smallest = std::min_element(scratch_pool.begin(), scratch_pool.end(),
                                      [](const scratch& a, const scratch& b) { return a.capacity < b.capacity; });
    auto& ledger = tensor::memory_ledger::host();
    if (smallest->capacity >= capacity) {
      delete[] data;
      ledger.freed(tensor::memory_kind::other, std::int64_t(capacity * sizeof(float)));
      return;
    }
    ledger.freed(tensor::memory_kind::other, std::int64_t(smallest->capacity * sizeof(float)));
    scratch_pool.erase(smallest);
  }
  scratch_pool.push_back({std::unique_ptr<float[]>(data), capacity});
}

}  // namespace

float* fp32_stage::widen(const tensor::const_tensor_view& v, bool write_back, bool read) {
  staged s;
  if (write_back) s.target = {const_cast<void*>(v.data), v.shape, v.type, v.where};
  s.size = static_cast<std::size_t>(v.numel());
  s.values = acquire_scratch(s.size, s.capacity);
  if (read) to_float(s.values, v, v.numel());
  staged_.push_back(std::move(s));
  return staged_.back().values;
}

fp32_stage::~fp32_stage() {
  for (auto& s : staged_) {
    if (s.target.data) {
      const auto n = static_cast<std::int64_t>(s.size);
      if (s.target.type == tensor::dtype::bfloat16)
        round_from_float(static_cast<tensor::bfloat16*>(s.target.data), s.values, n);
      else
        round_from_float(static_cast<tensor::float16*>(s.target.data), s.values, n);
    }
  }
  for (auto& s : staged_) release_scratch(s.values, s.capacity);
}

}  // namespace detail
}  // namespace mactor::kernels
