// LayerNorm forward/backward; statistics are accumulated in double for float inputs.
#include "kernels/layernorm.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "kernels/cpu/row_reduction.hpp"

namespace mactor::kernels {

template <typename T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int n,
                       int h, T eps, bool zero_centered_gamma) {
  const T shift = zero_centered_gamma ? T(1) : T(0);
#pragma omp parallel for schedule(static) if (std::int64_t(n) * h > 16384)
  for (int i = 0; i < n; ++i) {
    const T* xi = x + std::int64_t(i) * h;
    double sum = 0;
    for (int j = 0; j < h; ++j) sum += xi[j];
    const double mu = sum / h;
    double var = 0;
    for (int j = 0; j < h; ++j) var += (xi[j] - mu) * (xi[j] - mu);
    const T r = T(1.0 / std::sqrt(var / h + double(eps)));
    const T m = T(mu);
    mean[i] = m;
    rstd[i] = r;
    T* yi = y + std::int64_t(i) * h;
    for (int j = 0; j < h; ++j) {
      const T v = (xi[j] - m) * r * (gamma[j] + shift);
      yi[j] = beta ? v + beta[j] : v;
    }
  }
}

template <typename T>
void layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* gamma,
                        const T* mean, const T* rstd, int n, int h, bool zero_centered_gamma,
                        bool accumulate_dx) {
  const T shift = zero_centered_gamma ? T(1) : T(0);
  const int threads = std::int64_t(n) * h > 16384 ? omp_get_max_threads() : 1;
  const bool weights = dgamma != nullptr;
  detail::row_reduction<T> dg(weights ? threads : 0, h), db(weights ? threads : 0, h);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    T* dg_t = weights ? dg.slot(t) : nullptr;
    T* db_t = weights ? db.slot(t) : nullptr;
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const T* xi = x + std::int64_t(i) * h;
      const T* gi = dy + std::int64_t(i) * h;
      const T m = mean[i], r = rstd[i];
      if (!dx) {  // the weight gradients alone: the same sums as below
        for (int j = 0; j < h; ++j) {
          const T xhat = (xi[j] - m) * r;
          dg_t[j] += gi[j] * xhat;
          db_t[j] += gi[j];
        }
        continue;
      }
      T* dxi = dx + std::int64_t(i) * h;
      T sum_g = 0, sum_gx = 0;
      for (int j = 0; j < h; ++j) {
        const T xhat = (xi[j] - m) * r;
        const T g = gi[j] * (gamma[j] + shift);
        sum_g += g;
        sum_gx += g * xhat;
        if (weights) {
          dg_t[j] += gi[j] * xhat;
          db_t[j] += gi[j];
        }
      }
      const T mean_g = sum_g / h, mean_gx = sum_gx / h;
      for (int j = 0; j < h; ++j) {
        const T xhat = (xi[j] - m) * r;
        const T v = r * (gi[j] * (gamma[j] + shift) - mean_g - xhat * mean_gx);
        dxi[j] = accumulate_dx ? dxi[j] + v : v;
      }
    }
  }
  if (!weights) return;
  dg.add_to(dgamma, threads);
  if (dbeta) db.add_to(dbeta, threads);
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, int, int, float, bool);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*,
                                        const double*, int, int, double, bool);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, const float*, const float*, int, int, bool,
                                        bool);
template void layernorm_backward<double>(double*, double*, double*, const double*, const double*,
                                         const double*, const double*, const double*, int, int,
                                         bool, bool);


void layernorm_forward(tensor::tensor_view y, tensor::tensor_view mean, tensor::tensor_view rstd,
                       tensor::const_tensor_view x, tensor::const_tensor_view gamma,
                       tensor::const_tensor_view beta, int n, int h, double eps,
                       bool zero_centered_gamma) {
  const char* k = "layernorm_forward";
  check_compatible(k, {y, mean, rstd, x, gamma, beta});
  const std::int64_t nh = std::int64_t(n) * h;
  detail::need(k, "y", y, nh), detail::need(k, "x", x, nh);
  detail::need(k, "mean", mean, n), detail::need(k, "rstd", rstd, n);
  detail::need(k, "gamma", gamma, h), detail::need_optional(k, "beta", beta, h);
  if (on_device(y))
    return device_kernels_for("layernorm_forward", y).layernorm_forward(y, mean, rstd, x, gamma,
        beta, n, h, eps, zero_centered_gamma);
  detail::fp32_stage stage;
  dispatch_compute(k, y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    layernorm_forward<T>(stage.output<T>(y, nh), stage.output<T>(mean, n), stage.output<T>(rstd, n),
                         stage.typed<T>(x), stage.typed<T>(gamma), stage.typed<T>(beta), n,
                         h, T(eps), zero_centered_gamma);
  });
}

void layernorm_backward(tensor::tensor_view dx, tensor::tensor_view dgamma,
                        tensor::tensor_view dbeta, tensor::const_tensor_view dy,
                        tensor::const_tensor_view x, tensor::const_tensor_view gamma,
                        tensor::const_tensor_view mean, tensor::const_tensor_view rstd, int n,
                        int h, bool zero_centered_gamma, bool accumulate_dx) {
  const char* k = "layernorm_backward";
  check_compatible(k, {dx, dgamma, dbeta, dy, x, gamma, mean, rstd});
  const std::int64_t nh = std::int64_t(n) * h;
  if (!dx.data && !dgamma.data) throw std::invalid_argument("layernorm_backward: neither dx nor dgamma asked for");
  detail::need_optional(k, "dx", dx, nh), detail::need(k, "dy", dy, nh), detail::need(k, "x", x, nh);
  detail::need_optional(k, "dgamma", dgamma, h), detail::need_optional(k, "dbeta", dbeta, h);
  if (dbeta.data && !dgamma.data) throw std::invalid_argument("layernorm_backward: dbeta without dgamma");
  detail::need(k, "gamma", gamma, h);
  detail::need(k, "mean", mean, n), detail::need(k, "rstd", rstd, n);
  if (on_device(dy))  // dx may be absent (the weight gradients alone)
    return device_kernels_for("layernorm_backward", dy).layernorm_backward(dx, dgamma, dbeta, dy, x,
        gamma, mean, rstd, n, h, zero_centered_gamma, accumulate_dx);
  detail::fp32_stage stage;
  dispatch_compute(k, dy.type, dy.where, [&](auto zero) {
    using T = decltype(zero);
    T* dx_out = !dx.data ? nullptr : accumulate_dx ? stage.typed<T>(dx) : stage.output<T>(dx, nh);
    layernorm_backward<T>(dx_out, stage.typed<T>(dgamma), stage.typed<T>(dbeta),
                          stage.typed<T>(dy), stage.typed<T>(x), stage.typed<T>(gamma),
                          stage.typed<T>(mean), stage.typed<T>(rstd), n, h,
                          zero_centered_gamma, accumulate_dx);
  });
}

}  // namespace mactor::kernels
