// Vectorizable float math for the elementwise kernels: exp, erf and tanh built from arithmetic
// the compiler turns into SIMD (libm's scalar expf/erff dominated the loss and GeLU otherwise),
// with row helpers compiled for AVX-512, AVX2 and baseline x86-64, chosen at load time.
// Double precision (the gradient-check instantiations) keeps std:: functions.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/dropout.hpp"

namespace mactor::kernels::detail {

/// exp(x) to about 2 ulp for x in float range; 0 below -87.3, clamped above 88.7.
inline float exp_approx(float x) {
  // Comparisons rather than std::fmin/fmax: those keep NaN rules that block vectorization.
  const float low = x < -87.3f ? -87.3f : x;
  const float clamped = low > 88.7f ? 88.7f : low;
  // n = round(x / ln2) by the 1.5 * 2^23 trick; r = x - n ln2 in two parts.
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((std::int32_t(n) + 127) << 23);
  return x < -87.3f ? 0.0f : e * scale;
}

/// erf(x), absolute error below 5e-7 (Abramowitz & Stegun 7.1.26 with exp_approx).
inline float erf_approx(float x) {
  const float a = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float y = 1.0f - p * t * exp_approx(-a * a);
  return x < 0.0f ? -y : y;
}

/// tanh(x) = 1 - 2 / (exp(2x) + 1), saturating cleanly at large |x|.
inline float tanh_approx(float x) { return 1.0f - 2.0f / (exp_approx(2.0f * x) + 1.0f); }

/// y[i] = x[i] / (1 - p) where dropout_uniform(stream, first + i) >= p, else 0; y may alias x.
/// Every dropout loop of the float kernels (dropout_apply, bias_dropout_add, the attention
/// probabilities', ring attention's tiles') goes through it: the hash's 64-bit multiplies then run
/// in AVX2/AVX-512 lanes, the same values as one element at a time.
void dropout_scale_f32(float* y, const float* x, std::int64_t n, float p, std::uint64_t stream, std::uint64_t first);

/// The same for any element type: float through dropout_scale_f32, others one element at a time
/// in their own precision (x / (1 - p) computed as x * (1 / (1 - p)), as the float loop does).
template <typename T>
void dropout_scale(T* y, const T* x, std::int64_t n, float p, std::uint64_t stream, std::uint64_t first) {
  if constexpr (std::is_same_v<T, float>) {
    dropout_scale_f32(y, x, n, p, stream, first);
  } else {
    const T scale = T(1) / (T(1) - T(p));
    for (std::int64_t i = 0; i < n; ++i)
      y[i] = dropout_uniform(stream, first + std::uint64_t(i)) >= p ? x[i] * scale : T(0);
  }
}

/// max of row[0, n)
float row_max(const float* row, int n);
/// row[i] = exp(row[i] - shift) in place; returns the sum.
float exp_shifted_sum(float* row, int n, float shift);

}  // namespace mactor::kernels::detail

namespace mactor::kernels::detail {

/// y[n] = gelu(x[n]) and dx[n] = dy[n] * gelu'(x[n]) for float, erf or tanh form.
void gelu_forward_f32(float* y, const float* x, std::int64_t n, bool tanh_form);
void gelu_backward_f32(float* dx, const float* dy, const float* x, std::int64_t n,
                       bool tanh_form);

}  // namespace mactor::kernels::detail
