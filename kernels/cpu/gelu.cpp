// GeLU forward/backward (erf and tanh forms).
#include "kernels/gelu.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/vector_math.hpp"

namespace mactor::kernels {
namespace {

constexpr double inv_sqrt2 = 0.70710678118654752440;
constexpr double inv_sqrt_2pi = 0.39894228040143267794;
constexpr double sqrt_2_over_pi = 0.79788456080286535588;
constexpr double tanh_coeff = 0.044715;

constexpr std::int64_t block = 4096;

template <typename T>
T gelu_value(T x, bool tanh_form) {
  if (tanh_form) {
    const T u = T(sqrt_2_over_pi) * x * (T(1) + T(tanh_coeff) * x * x);
    return T(0.5) * x * (T(1) + std::tanh(u));
  }
  return T(0.5) * x * (T(1) + std::erf(x * T(inv_sqrt2)));
}

template <typename T>
T gelu_slope(T x, bool tanh_form) {
  if (tanh_form) {
    const T u = T(sqrt_2_over_pi) * x * (T(1) + T(tanh_coeff) * x * x);
    const T t = std::tanh(u);
    const T du = T(sqrt_2_over_pi) * (T(1) + T(3 * tanh_coeff) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
  }
  return T(0.5) * (T(1) + std::erf(x * T(inv_sqrt2))) +
         x * T(inv_sqrt_2pi) * std::exp(-T(0.5) * x * x);
}

}  // namespace

// Float runs the SIMD loops of vector_math (split in blocks over threads); double the
// reference formulas above.
template <typename T>
void gelu_forward(T* y, const T* x, std::int64_t n, bool tanh_approximation) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp parallel for schedule(static) if (n > 16384)
    for (std::int64_t b = 0; b < n; b += block)
      detail::gelu_forward_f32(y + b, x + b, std::min(block, n - b), tanh_approximation);
  } else {
    for (std::int64_t i = 0; i < n; ++i) y[i] = gelu_value(x[i], tanh_approximation);
  }
}

template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n, bool tanh_approximation) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp parallel for schedule(static) if (n > 16384)
    for (std::int64_t b = 0; b < n; b += block)
      detail::gelu_backward_f32(dx + b, dy + b, x + b, std::min(block, n - b),
                                tanh_approximation);
  } else {
    for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_slope(x[i], tanh_approximation);
  }
}

template void gelu_forward<float>(float*, const float*, std::int64_t, bool);
template void gelu_forward<double>(double*, const double*, std::int64_t, bool);
template void gelu_backward<float>(float*, const float*, const float*, std::int64_t, bool);
template void gelu_backward<double>(double*, const double*, const double*, std::int64_t, bool);


void gelu_forward(tensor::tensor_view y, tensor::const_tensor_view x, std::int64_t n,
                  bool tanh_approximation) {
  check_compatible("gelu_forward", {y, x});
  detail::need("gelu_forward", "y", y, n);
  detail::need("gelu_forward", "x", x, n);
  if (on_device(y))
    return device_kernels_for("gelu_forward", y).gelu_forward(y, x, n, tanh_approximation);
  detail::fp32_stage stage;
  dispatch_compute("gelu_forward", y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    gelu_forward<T>(stage.output<T>(y, n), stage.typed<T>(x), n, tanh_approximation);
  });
}

void gelu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                   tensor::const_tensor_view x, std::int64_t n, bool tanh_approximation) {
  check_compatible("gelu_backward", {dx, dy, x});
  detail::need("gelu_backward", "dx", dx, n);
  detail::need("gelu_backward", "dy", dy, n);
  detail::need("gelu_backward", "x", x, n);
  if (on_device(dx))
    return device_kernels_for("gelu_backward", dx).gelu_backward(dx, dy, x, n, tanh_approximation);
  detail::fp32_stage stage;
  dispatch_compute("gelu_backward", dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    gelu_backward<T>(stage.output<T>(dx, n), stage.typed<T>(dy), stage.typed<T>(x), n,
                     tanh_approximation);
  });
}

}  // namespace mactor::kernels
