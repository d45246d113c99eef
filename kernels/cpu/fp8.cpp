// fp8 quantization kernels on the CPU: element-wise casts through tensor/float8.hpp, and the
// block scales of MXFP8 and Float8BlockScaling.
#include "kernels/fp8.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <string>

#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"
#include "tensor/float8.hpp"

namespace mactor::kernels {
namespace {

constexpr std::int64_t parallel_threshold = 1 << 16;

std::uint8_t narrow(float v, fp8_type t) {
  return t == fp8_type::e4m3 ? tensor::to_float8_e4m3(v).bits : tensor::to_float8_e5m2(v).bits;
}
float widen(std::uint8_t b, fp8_type t) {
  return t == fp8_type::e4m3 ? tensor::to_float(tensor::float8_e4m3{b}) : tensor::to_float(tensor::float8_e5m2{b});
}

void need_floating(const char* kernel, const tensor::const_tensor_view& v) {
  if (v.type == tensor::dtype::float64)
    throw tensor::tensor_error(std::string("kernel ") + kernel + " takes fp32, bf16 or fp16 tensors, not fp64");
}

// TE's E8M0 encoding of a positive value, rounded up to the next power of two (its fallback
// for GPUs without the cvt.rp.satfinite.ue8m0 instruction, which it equals).
std::uint8_t float_to_e8m0(float v) {
  if (std::isnan(v)) return 0xff;
  if (std::isinf(v)) return 0xfe;
  if (v == 0.0f) return 0;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  auto exponent = static_cast<std::uint8_t>(u >> 23);
  const std::uint32_t mantissa = u & 0x7fffffu;
  if (mantissa > 0 && exponent != 0xfe && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
  return exponent;
}

}  // namespace

float fp8_max(fp8_type t) { return t == fp8_type::e4m3 ? tensor::float8_e4m3_max : tensor::float8_e5m2_max; }

float amax(tensor::const_tensor_view x) {
  need_floating("amax", x);
  if (on_device(x)) return device_kernels_for("amax", x).amax(x);
  detail::fp32_stage stage;
  const float* v = stage.typed<float>(x);
  float m = 0.0f;
  bool nan = false;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    nan |= std::isnan(v[i]);
    m = std::max(m, std::fabs(v[i]));
  }
  return nan ? NAN : m;
}

void quantize_fp8(std::uint8_t* q, tensor::const_tensor_view x, float scale, fp8_type t) {
  need_floating("quantize_fp8", x);
  detail::fp32_stage stage;
  const float* v = stage.typed<float>(x);
  const std::int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n > parallel_threshold)
  for (std::int64_t i = 0; i < n; ++i) q[i] = narrow(v[i] * scale, t);
}

void dequantize_fp8(tensor::tensor_view out, const std::uint8_t* q, float scale_inv, fp8_type t) {
  float* o = out.host<float>().data();
  const std::int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n > parallel_threshold)
  for (std::int64_t i = 0; i < n; ++i) o[i] = widen(q[i], t) * scale_inv;
}

void round_through_fp8(tensor::tensor_view out, tensor::const_tensor_view x, float scale,
                       float scale_inv, fp8_type t) {
  need_floating("round_through_fp8", x);
  detail::need("round_through_fp8", "out", out, x.numel());
  if (on_device(out) || on_device(x)) {
    check_compatible("round_through_fp8", {out, x});
    return device_kernels_for("round_through_fp8", out).round_through_fp8(out, x, scale, scale_inv, t);
  }
  detail::fp32_stage stage;
  const float* v = stage.typed<float>(x);
  float* o = out.host<float>().data();
  const std::int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n > parallel_threshold)
  for (std::int64_t i = 0; i < n; ++i) o[i] = widen(narrow(v[i] * scale, t), t) * scale_inv;
}

std::pair<float, float> current_scale(float amax, float fp8_max, bool power_of_two) {
  float scale = 1.0f;
  if (!(std::isinf(amax) || amax == 0.0f || std::isnan(amax))) {
    scale = fp8_max / amax;
    if (std::isinf(scale)) scale = FLT_MAX;
    if (power_of_two) scale = std::bit_cast<float>(std::bit_cast<std::uint32_t>(scale) & 0xff800000u);
  }
  return {scale, 1.0f / scale};
}

std::pair<float, float> block_scale(float amax, float fp8_max, block_scale_rule rule) {
  if (rule == block_scale_rule::power_of_two) return current_scale(amax, fp8_max, true);
  // MXFP8: amax times the rounded reciprocal of fp8_max, as TE multiplies by max_norm_rcp. A
  // zero exponent quantizes with 1 (TE's exp2f_rcp) while the GEMM still applies 2^-127.
  const std::uint8_t e = float_to_e8m0(amax * (1.0f / fp8_max));
  const float scale = e == 0 ? 1.0f : std::bit_cast<float>(std::uint32_t(254 - e) << 23);
  const float scale_inv = e == 0 ? 0x1.0p-127f : std::bit_cast<float>(std::uint32_t(e) << 23);
  return {scale, scale_inv};
}

void round_through_fp8_blocks(tensor::tensor_view out, tensor::const_tensor_view x, int rows,
                              int cols, int block_rows, int block_cols, block_scale_rule rule,
                              fp8_type t) {
  need_floating("round_through_fp8_blocks", x);
  detail::need("round_through_fp8_blocks", "x", x, std::int64_t(rows) * cols);
  detail::need("round_through_fp8_blocks", "out", out, std::int64_t(rows) * cols);
  if (block_rows < 1 || block_cols < 1)
    throw tensor::tensor_error("kernel round_through_fp8_blocks: blocks of " + std::to_string(block_rows) + " x " +
                               std::to_string(block_cols));
  if (on_device(out) || on_device(x)) {
    check_compatible("round_through_fp8_blocks", {out, x});
    return device_kernels_for("round_through_fp8_blocks", out)
        .round_through_fp8_blocks(out, x, rows, cols, block_rows, block_cols, rule, t);
  }
  detail::fp32_stage stage;
  const float* v = stage.typed<float>(x);
  float* o = out.host<float>().data();
  const float top = fp8_max(t);
  const int block_grid_rows = (rows + block_rows - 1) / block_rows;
  const int block_grid_cols = (cols + block_cols - 1) / block_cols;
#pragma omp parallel for schedule(static) if (std::int64_t(rows) * cols > parallel_threshold)
  for (std::int64_t b = 0; b < std::int64_t(block_grid_rows) * block_grid_cols; ++b) {
    const int r0 = int(b / block_grid_cols) * block_rows, c0 = int(b % block_grid_cols) * block_cols;
    const int r1 = std::min(rows, r0 + block_rows), c1 = std::min(cols, c0 + block_cols);
    float m = 0.0f;
    bool nan = false;
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const float e = v[std::int64_t(r) * cols + c];
        nan |= std::isnan(e);
        m = std::max(m, std::fabs(e));
      }
    const auto [scale, scale_inv] = block_scale(nan ? NAN : m, top, rule);
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const std::int64_t i = std::int64_t(r) * cols + c;
        o[i] = widen(narrow(v[i] * scale, t), t) * scale_inv;
      }
  }
}

}  // namespace mactor::kernels
