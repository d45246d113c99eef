// Causal depthwise conv1d forward/backward on [batch, seq, channels] rows. The backward first
// forms d(pre-activation) per row, then gathers dx (no scatter, so rows run in parallel) and
// sums dw and dbias in per-thread partials.
#include "kernels/causal_conv1d.hpp"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/row_reduction.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::kernels {
namespace {

// Pre-activation of row (b, t) into pre[channels].
template <typename T>
void conv_row(T* pre, const T* x, const T* w, const T* bias, int b, int t, int seq, int ch,
              int width) {
  for (int c = 0; c < ch; ++c) pre[c] = bias ? bias[c] : T(0);
  for (int k = 0; k < width; ++k) {
    const int src = t - (width - 1) + k;
    if (src < 0) continue;
    const T* xr = x + (std::int64_t(b) * seq + src) * ch;
    for (int c = 0; c < ch; ++c) pre[c] += w[std::int64_t(c) * width + k] * xr[c];
  }
}

template <typename T>
T sigmoid(T u) {
  return T(1) / (T(1) + std::exp(-u));
}

}  // namespace

template <typename T>
void causal_conv1d_forward(T* y, const T* x, const T* w, const T* bias, int batch, int seq,
                           int channels, int width, bool silu) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < batch * seq; ++r) {
    T* yr = y + std::int64_t(r) * channels;
    conv_row(yr, x, w, bias, r / seq, r % seq, seq, channels, width);
    if (silu)
      for (int c = 0; c < channels; ++c) yr[c] *= sigmoid(yr[c]);
  }
}

template <typename T>
void causal_conv1d_backward(T* dx, T* dw, T* dbias, const T* dy, const T* x, const T* w,
                            const T* bias, int batch, int seq, int channels, int width,
                            bool silu) {
  const int rows = batch * seq;
  std::vector<T> dpre(std::size_t(rows) * channels);
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    T* d = dpre.data() + std::int64_t(r) * channels;
    const T* g = dy + std::int64_t(r) * channels;
    if (!silu) {
      for (int c = 0; c < channels; ++c) d[c] = g[c];
      continue;
    }
    conv_row(d, x, w, bias, r / seq, r % seq, seq, channels, width);
    for (int c = 0; c < channels; ++c) {  // silu'(u) = s (1 + u (1 - s))
      const T s = sigmoid(d[c]);
      d[c] = g[c] * s * (T(1) + d[c] * (T(1) - s));
    }
  }
  const int threads = omp_get_max_threads();
  detail::row_reduction<T> partial(dw ? threads : 0, channels * (width + 1));
#pragma omp parallel num_threads(threads)
  {
    T* part = dw ? partial.slot(omp_get_thread_num()) : nullptr;  // [channels, width] then [channels]
#pragma omp for schedule(static)
    for (int r = 0; r < rows; ++r) {
      const int b = r / seq, t = r % seq;
      T* dxr = dx ? dx + std::int64_t(r) * channels : nullptr;
      const T* xr = x + std::int64_t(r) * channels;
      if (dxr)
        for (int c = 0; c < channels; ++c) dxr[c] = T(0);
      for (int k = 0; k < width; ++k) {  // x[t] feeds output t + (width - 1) - k
        const int out = t + (width - 1) - k;
        if (out >= seq) continue;
        const T* d = dpre.data() + (std::int64_t(b) * seq + out) * channels;
        if (dxr)
          for (int c = 0; c < channels; ++c) dxr[c] += w[std::int64_t(c) * width + k] * d[c];
        if (part)
          for (int c = 0; c < channels; ++c) part[std::int64_t(c) * width + k] += d[c] * xr[c];
      }
      const T* d = dpre.data() + std::int64_t(r) * channels;
      if (part)
        for (int c = 0; c < channels; ++c) part[std::int64_t(channels) * width + c] += d[c];
    }
  }
  if (!dw) return;
  std::vector<T> sum(std::size_t(channels) * (width + 1), T(0));
  partial.add_to(sum.data(), threads);
  for (int i = 0; i < channels * width; ++i) dw[i] += sum[i];
  if (dbias)
    for (int c = 0; c < channels; ++c) dbias[c] += sum[std::size_t(channels) * width + c];
}

template void causal_conv1d_forward<float>(float*, const float*, const float*, const float*, int,
                                           int, int, int, bool);
template void causal_conv1d_forward<double>(double*, const double*, const double*,
                                            const double*, int, int, int, int, bool);
template void causal_conv1d_backward<float>(float*, float*, float*, const float*, const float*,
                                            const float*, const float*, int, int, int, int, bool);
template void causal_conv1d_backward<double>(double*, double*, double*, const double*,
                                             const double*, const double*, const double*, int,
                                             int, int, int, bool);

void causal_conv1d_forward(tensor::tensor_view y, tensor::const_tensor_view x,
                           tensor::const_tensor_view w, tensor::const_tensor_view bias, int batch,
                           int seq, int channels, int width, bool silu) {
  const char* k = "causal_conv1d_forward";
  check_compatible(k, {y, x, w, bias});
  const std::int64_t n = std::int64_t(batch) * seq * channels;
  detail::need(k, "y", y, n), detail::need(k, "x", x, n);
  detail::need(k, "w", w, std::int64_t(channels) * width);
  detail::need_optional(k, "bias", bias, channels);
  if (on_device(y)) return device_kernels_for(k, y).causal_conv1d_forward(y, x, w, bias, batch, seq, channels, width, silu);
  detail::fp32_stage stage;
  dispatch_compute(k, y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    causal_conv1d_forward<T>(stage.output<T>(y, n), stage.typed<T>(x), stage.typed<T>(w),
                             stage.typed<T>(bias), batch, seq, channels, width, silu);
  });
}

void causal_conv1d_backward(tensor::tensor_view dx, tensor::tensor_view dw,
                            tensor::tensor_view dbias, tensor::const_tensor_view dy,
                            tensor::const_tensor_view x, tensor::const_tensor_view w,
                            tensor::const_tensor_view bias, int batch, int seq, int channels,
                            int width, bool silu) {
  const char* k = "causal_conv1d_backward";
  check_compatible(k, {dx, dw, dbias, dy, x, w, bias});
  const std::int64_t n = std::int64_t(batch) * seq * channels;
  if (!dx.data && !dw.data) throw std::invalid_argument("causal_conv1d_backward: neither dx nor dw asked for");
  if (!dw.data && dbias.data) throw std::invalid_argument("causal_conv1d_backward: dbias goes with dw");
  detail::need_optional(k, "dx", dx, n), detail::need(k, "dy", dy, n), detail::need(k, "x", x, n);
  detail::need_optional(k, "dw", dw, std::int64_t(channels) * width);
  detail::need(k, "w", w, std::int64_t(channels) * width);
  detail::need_optional(k, "dbias", dbias, channels);
  detail::need_optional(k, "bias", bias, channels);
  if (on_device(dy))
    return device_kernels_for(k, dy).causal_conv1d_backward(dx, dw, dbias, dy, x, w, bias, batch, seq, channels, width,
                                                            silu);
  detail::fp32_stage stage;
  dispatch_compute(k, dy.type, dy.where, [&](auto zero) {
    using T = decltype(zero);
    causal_conv1d_backward<T>(stage.output<T>(dx, n), stage.typed<T>(dw), stage.typed<T>(dbias),
                              stage.typed<T>(dy), stage.typed<T>(x), stage.typed<T>(w),
                              stage.typed<T>(bias), batch, seq, channels, width, silu);
  });
}

}  // namespace mactor::kernels
