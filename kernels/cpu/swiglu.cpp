// SwiGLU forward/backward.
#include "kernels/swiglu.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <cmath>
#include <cstdint>

namespace mactor::kernels {

template <typename T>
void swiglu_forward(T* y, const T* x, int n, int f) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * f > 16384)
  for (int i = 0; i < n; ++i) {
    const T* gate = x + std::int64_t(i) * 2 * f;
    const T* up = gate + f;
    T* yi = y + std::int64_t(i) * f;
    for (int j = 0; j < f; ++j) {
      const T s = T(1) / (T(1) + std::exp(-gate[j]));
      yi[j] = gate[j] * s * up[j];
    }
  }
}

template <typename T>
void swiglu_backward(T* dx, const T* dy, const T* x, int n, int f) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * f > 16384)
  for (int i = 0; i < n; ++i) {
    const T* gate = x + std::int64_t(i) * 2 * f;
    const T* up = gate + f;
    const T* g = dy + std::int64_t(i) * f;
    T* dgate = dx + std::int64_t(i) * 2 * f;
    T* dup = dgate + f;
    for (int j = 0; j < f; ++j) {
      const T s = T(1) / (T(1) + std::exp(-gate[j]));
      const T silu = gate[j] * s;
      dgate[j] = g[j] * up[j] * s * (T(1) + gate[j] * (T(1) - s));
      dup[j] = g[j] * silu;
    }
  }
}

template void swiglu_forward<float>(float*, const float*, int, int);
template void swiglu_forward<double>(double*, const double*, int, int);
template void swiglu_backward<float>(float*, const float*, const float*, int, int);
template void swiglu_backward<double>(double*, const double*, const double*, int, int);


void swiglu_forward(tensor::tensor_view y, tensor::const_tensor_view x, int n, int f) {
  check_compatible("swiglu_forward", {y, x});
  detail::need("swiglu_forward", "y", y, std::int64_t(n) * f);
  detail::need("swiglu_forward", "x", x, std::int64_t(n) * 2 * f);
  if (on_device(y)) return device_kernels_for("swiglu_forward", y).swiglu_forward(y, x, n, f);
  detail::fp32_stage stage;
  dispatch_compute("swiglu_forward", y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    swiglu_forward<T>(stage.output<T>(y, std::int64_t(n) * f), stage.typed<T>(x), n, f);
  });
}

void swiglu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                     tensor::const_tensor_view x, int n, int f) {
  check_compatible("swiglu_backward", {dx, dy, x});
  detail::need("swiglu_backward", "dx", dx, std::int64_t(n) * 2 * f);
  detail::need("swiglu_backward", "dy", dy, std::int64_t(n) * f);
  detail::need("swiglu_backward", "x", x, std::int64_t(n) * 2 * f);
  if (on_device(dx))
    return device_kernels_for("swiglu_backward", dx).swiglu_backward(dx, dy, x, n, f);
  detail::fp32_stage stage;
  dispatch_compute("swiglu_backward", dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    swiglu_backward<T>(stage.output<T>(dx, std::int64_t(n) * 2 * f), stage.typed<T>(dy), stage.typed<T>(x), n, f);
  });
}

}  // namespace mactor::kernels
