// Optimizer states in bf16, fp16 or fp8 with Transformer Engine FusedAdam's scaling arithmetic.
#include "model/optimizer_state.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/convert.hpp"
#include "kernels/fp8.hpp"
#include "kernels/tensor_ops.hpp"
#include "tensor/half_float.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {
namespace {

constexpr float fp16_range = 65504.0f / 2.0f;  // FusedAdam's dtype_to_range_map[float16]
constexpr float fp8_range = 448.0f;            // ... and [uint8]: E4M3's largest finite value

// The largest |value| (NaN when one is NaN, as torch's max of the absolute values): the same
// kernel on the host and on a device, so both take the same scale.
float absmax(std::span<const float> values) { return kernels::amax(tensor::view_of(values)); }

// fp16's scale from the values' absmax, and the multiplier that stores them (0 for all zeros).
std::pair<float, float> fp16_scales(float amax) {
  const float scale = amax / fp16_range;
  return {scale, scale > 0.0f ? 1.0f / scale : 0.0f};
}

}  // namespace

std::optional<state_dtype> parse_state_dtype(std::string_view text) {
  if (text == "fp32" || text == "float32") return state_dtype::fp32;
  if (text == "fp16" || text == "float16") return state_dtype::fp16;
  if (text == "bf16" || text == "bfloat16") return state_dtype::bf16;
  if (text == "fp8" || text == "uint8") return state_dtype::fp8;
  return std::nullopt;
}

std::string_view to_string(state_dtype t) {
  switch (t) {
    case state_dtype::fp16: return "fp16";
    case state_dtype::bf16: return "bf16";
    case state_dtype::fp8: return "fp8";
    default: return "fp32";
  }
}

std::size_t element_bytes(state_dtype t) {
  switch (t) {
    case state_dtype::fp16:
    case state_dtype::bf16: return 2;
    case state_dtype::fp8: return 1;
    default: return 4;
  }
}

// E4M3: 4 exponent bits (bias 7), 3 mantissa bits, no infinities, 0x7f is NaN. Rounding is
// nearest-even (std::nearbyint in the default mode) on exactly scaled values.
std::uint8_t to_e4m3(float x) {
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::abs(x);
  if (std::isnan(a)) return sign | 0x7f;
  if (a >= fp8_range) return sign | 0x7e;  // satfinite
  if (a < 0x1p-6f) return sign | static_cast<std::uint8_t>(std::nearbyint(a * 0x1p9f));  // subnormal (8 is 2^-6)
  int k = 0;
  const float f = std::frexp(a, &k);  // a = f * 2^k, f in [0.5, 1)
  int exponent = k - 1 + 7;
  int mantissa = static_cast<int>(std::nearbyint((2.0f * f - 1.0f) * 8.0f));
  if (mantissa == 8) mantissa = 0, ++exponent;
  const int code = (exponent << 3) | mantissa;
  return sign | static_cast<std::uint8_t>(std::min(code, 0x7e));
}

float from_e4m3(std::uint8_t code) {
  const int e = (code >> 3) & 0xf, m = code & 0x7;
  float a = 0.0f;
  if (e == 0xf && m == 0x7) a = std::numeric_limits<float>::quiet_NaN();
  else if (e == 0) a = std::ldexp(static_cast<float>(m), -9);
  else a = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return (code & 0x80) ? -a : a;
}

scaled_state::scaled_state(const scaled_state& other)
    : type_(other.type_), size_(other.size_), f32_(other.f32_), h16_(other.h16_), f8_(other.f8_),
      scale_(other.scale_), device_(other.device_.defined() ? other.device_.clone() : tensor::tensor()),
      counted_(other.counted_) {}

scaled_state& scaled_state::operator=(const scaled_state& other) {
  if (this != &other) *this = scaled_state(other);
  return *this;
}

void scaled_state::zero(std::size_t n, tensor::device where) {
  f32_.clear(), h16_.clear(), f8_.clear();
  device_ = tensor::tensor();
  size_ = n;
  scale_ = 1.0f;
  if (where != tensor::cpu) {
    if (type_ == state_dtype::fp8)
      throw tensor::tensor_error(std::string("an optimizer state in fp8 on ") + tensor::to_string(where) +
                                 ": the precision-aware optimizer's fp8 states are host-only so far; "
                                 "use bf16, fp16 or fp32 for --exp-avg-dtype and --exp-avg-sq-dtype on a GPU");
    counted_.set(0);  // counted by the device's allocator
    const auto type = type_ == state_dtype::bf16   ? tensor::dtype::bfloat16
                      : type_ == state_dtype::fp16 ? tensor::dtype::float16
                                                   : tensor::dtype::float32;
    device_ = tensor::tensor({std::int64_t(n)}, type, tensor::memory_kind::optimizer_state, where);
    return;
  }
  counted_.set(std::int64_t(n * element_bytes(type_)));
  if (type_ == state_dtype::fp32) f32_.assign(n, 0.0f);
  else if (type_ == state_dtype::fp8) f8_.assign(n, 0);
  else h16_.assign(n, 0);  // +0 in both 16-bit formats
}

tensor::tensor_view scaled_state::fp32_view() {
  if (type_ != state_dtype::fp32 || size_ == 0) return {};
  if (device_.defined()) return device_.view();
  return tensor::view_of(std::span<float>(f32_));
}

void scaled_state::widen_into(tensor::tensor_view wide) const {
  kernels::convert(wide, device_.view());
  if (type_ == state_dtype::fp16) kernels::scale(wide, scale_);
}

void scaled_state::round_from(tensor::tensor_view wide) {
  if (type_ == state_dtype::fp16) {
    const auto [scale, store] = fp16_scales(kernels::amax(wide));
    kernels::scale(wide, store);
    scale_ = scale;
  }
  kernels::convert(device_.view(), wide);
}

void scaled_state::unscale(std::span<float> out) const {
  if (device_.defined()) {  // fp32 comes down as it is; others widened by the device's conversions first
    if (type_ == state_dtype::fp32) return tensor::copy_between(tensor::view_of(out.first(size_)), device_.view());
    tensor::tensor wide(device_.shape(), tensor::dtype::float32, tensor::memory_kind::optimizer_state, device_.where());
    widen_into(wide.view());
    return tensor::copy_between(tensor::view_of(out.first(size_)), wide);
  }
  switch (type_) {  // one loop per dtype: the fp32 one is a copy
    case state_dtype::fp32: std::copy_n(f32_.data(), size_, out.data()); return;
    case state_dtype::bf16:
      for (std::size_t i = 0; i < size_; ++i) out[i] = tensor::to_float(tensor::bfloat16{h16_[i]});
      return;
    case state_dtype::fp16:
      for (std::size_t i = 0; i < size_; ++i) out[i] = tensor::to_float(tensor::float16{h16_[i]}) * scale_;
      return;
    case state_dtype::fp8:
      for (std::size_t i = 0; i < size_; ++i) out[i] = from_e4m3(f8_[i]) * scale_;
      return;
  }
}

void scaled_state::set(std::span<const float> values) {
  if (device_.defined()) {  // fp32 goes up as it is; others rounded by the device's conversions (as the update's)
    if (values.size() != size_) zero(values.size(), device_.where());
    if (type_ == state_dtype::fp32) return tensor::copy_between(device_.view(), tensor::view_of(values));
    auto wide = tensor::copy_to(tensor::view_of(values), device_.where(), tensor::memory_kind::optimizer_state);
    return round_from(wide.view());
  }
  counted_.set(std::int64_t(values.size() * element_bytes(type_)));
  size_ = values.size();
  switch (type_) {
    case state_dtype::fp32: f32_.assign(values.begin(), values.end()); return;
    case state_dtype::bf16:
      h16_.resize(size_);
      for (std::size_t i = 0; i < size_; ++i) h16_[i] = tensor::to_bfloat16(values[i]).bits;
      return;
    case state_dtype::fp16: {
      const auto [scale, rscale] = fp16_scales(absmax(values));
      h16_.resize(size_);
      for (std::size_t i = 0; i < size_; ++i) h16_[i] = tensor::to_float16(values[i] * rscale).bits;
      scale_ = scale;
      return;
    }
    case state_dtype::fp8: {
      // The quantizer's scale is 1 / (absmax / 448); the dequantizing scale_inv its reciprocal.
      // An all-zero tensor stays zeros with scale_inv 0 (1 / 0 would make NaNs of them).
      const float scale = absmax(values) / fp8_range;
      const float quantize = scale > 0.0f ? 1.0f / scale : 0.0f;
      f8_.resize(size_);
      for (std::size_t i = 0; i < size_; ++i) f8_[i] = to_e4m3(values[i] * quantize);
      scale_ = quantize > 0.0f ? 1.0f / quantize : 0.0f;
      return;
    }
  }
}

}  // namespace mactor::model
