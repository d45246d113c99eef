// Row helpers of vector_math.hpp, cloned per instruction set (GCC target_clones).
#include "kernels/cpu/vector_math.hpp"

#include <limits>

#include "kernels/dropout.hpp"
#include "kernels/gelu_constants.hpp"

namespace mactor::kernels::detail {

__attribute__((target_clones("avx512f", "avx2", "default")))
void dropout_scale_f32(float* y, const float* x, std::int64_t n, float p, std::uint64_t stream, std::uint64_t first) {
  const float scale = 1.0f / (1.0f - p);
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = dropout_uniform(stream, first + std::uint64_t(i)) >= p ? x[i] * scale : 0.0f;
}

__attribute__((target_clones("avx512f", "avx2", "default")))
float row_max(const float* row, int n) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  return mx;
}

__attribute__((target_clones("avx512f", "avx2", "default")))
float exp_shifted_sum(float* row, int n, float shift) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; ++j) {
    const float e = exp_approx(row[j] - shift);
    row[j] = e;
    sum += e;
  }
  return sum;
}

}  // namespace mactor::kernels::detail

namespace mactor::kernels::detail {
using namespace gelu_constants;

__attribute__((target_clones("avx512f", "avx2", "default")))
void gelu_forward_f32(float* y, const float* x, std::int64_t n, bool tanh_form) {
  if (tanh_form) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + tanh_approx(sqrt_2_over_pi * v * (1.0f + tanh_coeff * v * v)));
    }
  } else {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + erf_approx(x[i] * inv_sqrt2));
  }
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void gelu_backward_f32(float* dx, const float* dy, const float* x, std::int64_t n,
                       bool tanh_form) {
  if (tanh_form) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      const float t = tanh_approx(sqrt_2_over_pi * v * (1.0f + tanh_coeff * v * v));
      const float du = sqrt_2_over_pi * (1.0f + 3.0f * tanh_coeff * v * v);
      dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
  } else {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      dx[i] = dy[i] * (0.5f * (1.0f + erf_approx(v * inv_sqrt2)) +
                       v * inv_sqrt_2pi * exp_approx(-0.5f * v * v));
    }
  }
}

}  // namespace mactor::kernels::detail
