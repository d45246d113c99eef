// Dropout and bias-dropout-add with regenerated masks.
#include "kernels/dropout.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <algorithm>
#include <vector>

#include "kernels/cpu/vector_math.hpp"

namespace mactor::kernels {

namespace {
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

std::uint64_t dropout_stream(std::uint64_t seed, std::uint64_t layer, std::uint64_t site,
                             std::uint64_t step) {
  std::uint64_t s = mix(seed + 0x9E3779B97F4A7C15ull);
  s = mix(s ^ (layer + 1) * 0xD6E8FEB86659FD93ull);
  s = mix(s ^ (site + 1) * 0xA0761D6478BD642Full);
  return mix(s ^ (step + 1) * 0xE7037ED1A0B428DBull);
}

template <typename T>
void dropout_apply(T* y, const T* x, std::int64_t n, float p, std::uint64_t stream,
                   std::uint64_t first_index) {
  if (p <= 0.0f) {
    if (y != x)
      for (std::int64_t i = 0; i < n; ++i) y[i] = x[i];
    return;
  }
  constexpr std::int64_t block = 4096;  // a thread's share, in whole blocks
#pragma omp parallel for schedule(static) if (n > 16384)
  for (std::int64_t b = 0; b < n; b += block)
    detail::dropout_scale(y + b, x + b, std::min(block, n - b), p, stream, first_index + std::uint64_t(b));
}

template <typename T>
void bias_dropout_add(T* out, const T* residual, const T* x, const T* bias, int n, int w, float p,
                      std::uint64_t stream, std::uint64_t first_index) {
  if (p <= 0.0f) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * w > 16384)
    for (int i = 0; i < n; ++i) {
      const std::int64_t row = std::int64_t(i) * w;
      for (int j = 0; j < w; ++j) out[row + j] = residual[row + j] + (x[row + j] + (bias ? bias[j] : T(0)));
    }
    return;
  }
#pragma omp parallel if (std::int64_t(n) * w > 16384)
  {
    std::vector<T> v(static_cast<std::size_t>(w));
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const std::int64_t row = std::int64_t(i) * w;
      for (int j = 0; j < w; ++j) v[std::size_t(j)] = x[row + j] + (bias ? bias[j] : T(0));
      detail::dropout_scale(v.data(), v.data(), w, p, stream, first_index + std::uint64_t(row));
      for (int j = 0; j < w; ++j) out[row + j] = residual[row + j] + v[std::size_t(j)];
    }
  }
}

template void dropout_apply<float>(float*, const float*, std::int64_t, float, std::uint64_t,
                                   std::uint64_t);
template void dropout_apply<double>(double*, const double*, std::int64_t, float, std::uint64_t,
                                    std::uint64_t);
template void bias_dropout_add<float>(float*, const float*, const float*, const float*, int, int,
                                      float, std::uint64_t, std::uint64_t);
template void bias_dropout_add<double>(double*, const double*, const double*, const double*, int,
                                       int, float, std::uint64_t, std::uint64_t);


void dropout_apply(tensor::tensor_view y, tensor::const_tensor_view x, std::int64_t n, float p,
                   std::uint64_t stream, std::uint64_t first_index) {
  check_compatible("dropout_apply", {y, x});
  detail::need("dropout_apply", "y", y, n), detail::need("dropout_apply", "x", x, n);
  if (on_device(y))
    return device_kernels_for("dropout_apply", y).dropout_apply(y, x, n, p, stream, first_index);
  detail::fp32_stage stage;
  dispatch_compute("dropout_apply", y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    dropout_apply<T>(stage.output<T>(y, n), stage.typed<T>(x), n, p, stream, first_index);
  });
}

void bias_dropout_add(tensor::tensor_view out, tensor::const_tensor_view residual,
                      tensor::const_tensor_view x, tensor::const_tensor_view bias, int n, int w,
                      float p, std::uint64_t stream, std::uint64_t first_index) {
  const char* k = "bias_dropout_add";
  check_compatible(k, {out, residual, x, bias});
  const std::int64_t nw = std::int64_t(n) * w;
  detail::need(k, "out", out, nw), detail::need(k, "residual", residual, nw);
  detail::need(k, "x", x, nw), detail::need_optional(k, "bias", bias, w);
  if (on_device(out))
    return device_kernels_for("bias_dropout_add", out).bias_dropout_add(out, residual, x, bias, n,
        w, p, stream, first_index);
  detail::fp32_stage stage;
  dispatch_compute(k, out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    bias_dropout_add<T>(stage.output<T>(out, nw), stage.typed<T>(residual), stage.typed<T>(x),
                        stage.typed<T>(bias), n, w, p, stream, first_index);
  });
}

}  // namespace mactor::kernels
