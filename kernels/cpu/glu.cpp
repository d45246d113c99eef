// Gated linear unit (SiLU or quick GeLU gate, optional clamp and linear offset) forward/backward.
#include "kernels/glu.hpp"
#include "kernels/cpu/typed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace mactor::kernels {
namespace {

// The gate's activation a = g * sigmoid(k g) (k = 1: SiLU, 1.702: quick GeLU) and its slope.
template <typename T>
struct gate_fn {
  T k;
  T value(T g, T s) const { return g * s; }
  T sigmoid(T g) const { return T(1) / (T(1) + std::exp(-(k * g))); }
  T slope(T g, T s) const { return s * (T(1) + k * g * (T(1) - s)); }
};

template <typename T>
gate_fn<T> gate_of(const glu_options& o) {
  return {o.activation == glu_activation::quick_gelu ? T(1.702) : T(1)};
}

// The clamp bounds: +-c, or +-infinity without a clamp value.
template <typename T>
T bound_of(const glu_options& o) {
  return o.clamp ? T(*o.clamp) : std::numeric_limits<T>::infinity();
}

}  // namespace

template <typename T>
void glu_forward(T* y, const T* x, int n, int f, const glu_options& o) {
  const gate_fn<T> act = gate_of<T>(o);
  const T c = bound_of<T>(o), offset = T(o.linear_offset);
#pragma omp parallel for schedule(static) if (std::int64_t(n) * f > 16384)
  for (int i = 0; i < n; ++i) {
    const T* gate = x + std::int64_t(i) * 2 * f;
    const T* linear = gate + f;
    T* yi = y + std::int64_t(i) * f;
    for (int j = 0; j < f; ++j) {
      const T g = std::min(gate[j], c);
      const T l = std::min(std::max(linear[j], -c), c);
      yi[j] = act.value(g, act.sigmoid(g)) * (l + offset);
    }
  }
}

template <typename T>
void glu_backward(T* dx, const T* dy, const T* x, int n, int f, const glu_options& o) {
  const gate_fn<T> act = gate_of<T>(o);
  const T c = bound_of<T>(o), offset = T(o.linear_offset);
#pragma omp parallel for schedule(static) if (std::int64_t(n) * f > 16384)
  for (int i = 0; i < n; ++i) {
    const T* gate = x + std::int64_t(i) * 2 * f;
    const T* linear = gate + f;
    const T* g_out = dy + std::int64_t(i) * f;
    T* dgate = dx + std::int64_t(i) * 2 * f;
    T* dlinear = dgate + f;
    for (int j = 0; j < f; ++j) {
      const T g = std::min(gate[j], c);
      const T l = std::min(std::max(linear[j], -c), c);
      const T s = act.sigmoid(g);
      const bool gate_inside = gate[j] <= c;
      const bool linear_inside = linear[j] >= -c && linear[j] <= c;
      dgate[j] = gate_inside ? g_out[j] * (l + offset) * act.slope(g, s) : T(0);
      dlinear[j] = linear_inside ? g_out[j] * act.value(g, s) : T(0);
    }
  }
}

template void glu_forward<float>(float*, const float*, int, int, const glu_options&);
template void glu_forward<double>(double*, const double*, int, int, const glu_options&);
template void glu_backward<float>(float*, const float*, const float*, int, int, const glu_options&);
template void glu_backward<double>(double*, const double*, const double*, int, int, const glu_options&);

void glu_forward(tensor::tensor_view y, tensor::const_tensor_view x, int n, int f,
                 const glu_options& o) {
  check_compatible("glu_forward", {y, x});
  detail::need("glu_forward", "y", y, std::int64_t(n) * f);
  detail::need("glu_forward", "x", x, std::int64_t(n) * 2 * f);
  detail::fp32_stage stage;
  dispatch_compute("glu_forward", y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    glu_forward<T>(stage.output<T>(y, std::int64_t(n) * f), stage.typed<T>(x), n, f, o);
  });
}

void glu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                  tensor::const_tensor_view x, int n, int f, const glu_options& o) {
  check_compatible("glu_backward", {dx, dy, x});
  detail::need("glu_backward", "dx", dx, std::int64_t(n) * 2 * f);
  detail::need("glu_backward", "dy", dy, std::int64_t(n) * f);
  detail::need("glu_backward", "x", x, std::int64_t(n) * 2 * f);
  detail::fp32_stage stage;
  dispatch_compute("glu_backward", dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    glu_backward<T>(stage.output<T>(dx, std::int64_t(n) * 2 * f), stage.typed<T>(dy),
                    stage.typed<T>(x), n, f, o);
  });
}

}  // namespace mactor::kernels
