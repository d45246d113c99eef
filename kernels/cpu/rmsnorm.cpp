// RMSNorm forward/backward; the mean square is accumulated in double for float inputs.
#include "kernels/rmsnorm.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "kernels/cpu/row_reduction.hpp"

namespace mactor::kernels {

template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* gamma, int n, int h, T eps,
                     bool zero_centered_gamma) {
  const T shift = zero_centered_gamma ? T(1) : T(0);
#pragma omp parallel for schedule(static) if (std::int64_t(n) * h > 16384)
  for (int i = 0; i < n; ++i) {
    const T* xi = x + std::int64_t(i) * h;
    double sq = 0;
    for (int j = 0; j < h; ++j) sq += double(xi[j]) * xi[j];
    const T r = T(1.0 / std::sqrt(sq / h + double(eps)));
    rstd[i] = r;
    T* yi = y + std::int64_t(i) * h;
    for (int j = 0; j < h; ++j) yi[j] = xi[j] * r * (gamma[j] + shift);
  }
}

template <typename T>
void rmsnorm_backward(T* dx, T* dgamma, const T* dy, const T* x, const T* gamma, const T* rstd,
                      int n, int h, bool zero_centered_gamma, bool accumulate_dx) {
  const T shift = zero_centered_gamma ? T(1) : T(0);
  const int threads = std::int64_t(n) * h > 16384 ? omp_get_max_threads() : 1;
  const bool weights = dgamma != nullptr;
  detail::row_reduction<T> dg(weights ? threads : 0, h);
#pragma omp parallel num_threads(threads)
  {
    T* dg_t = weights ? dg.slot(omp_get_thread_num()) : nullptr;
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const T* xi = x + std::int64_t(i) * h;
      const T* gi = dy + std::int64_t(i) * h;
      const T r = rstd[i];
      if (!dx) {  // the weight gradient alone: the same sums as below
        for (int j = 0; j < h; ++j) dg_t[j] += gi[j] * (xi[j] * r);
        continue;
      }
      T* dxi = dx + std::int64_t(i) * h;
      T sum_gx = 0;
      for (int j = 0; j < h; ++j) {
        const T xhat = xi[j] * r;
        sum_gx += gi[j] * (gamma[j] + shift) * xhat;
        if (weights) dg_t[j] += gi[j] * xhat;
      }
      const T mean_gx = sum_gx / h;
      for (int j = 0; j < h; ++j) {
        const T v = r * (gi[j] * (gamma[j] + shift) - xi[j] * r * mean_gx);
        dxi[j] = accumulate_dx ? dxi[j] + v : v;
      }
    }
  }
  if (weights) dg.add_to(dgamma, threads);
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int, int, float,
                                     bool);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int, int,
                                      double, bool);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*,
                                      const float*, int, int, bool, bool);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*,
                                       const double*, const double*, int, int, bool, bool);


void rmsnorm_forward(tensor::tensor_view y, tensor::tensor_view rstd, tensor::const_tensor_view x,
                     tensor::const_tensor_view gamma, int n, int h, double eps,
                     bool zero_centered_gamma) {
  const char* k = "rmsnorm_forward";
  check_compatible(k, {y, rstd, x, gamma});
  const std::int64_t nh = std::int64_t(n) * h;
  detail::need(k, "y", y, nh), detail::need(k, "x", x, nh);
  detail::need(k, "rstd", rstd, n), detail::need(k, "gamma", gamma, h);
  if (on_device(y))
    return device_kernels_for("rmsnorm_forward", y).rmsnorm_forward(y, rstd, x, gamma, n, h, eps,
        zero_centered_gamma);
  detail::fp32_stage stage;
  dispatch_compute(k, y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    rmsnorm_forward<T>(stage.output<T>(y, nh), stage.output<T>(rstd, n), stage.typed<T>(x),
                       stage.typed<T>(gamma), n, h, T(eps), zero_centered_gamma);
  });
}

void rmsnorm_backward(tensor::tensor_view dx, tensor::tensor_view dgamma,
                      tensor::const_tensor_view dy, tensor::const_tensor_view x,
                      tensor::const_tensor_view gamma, tensor::const_tensor_view rstd, int n,
                      int h, bool zero_centered_gamma, bool accumulate_dx) {
  const char* k = "rmsnorm_backward";
  check_compatible(k, {dx, dgamma, dy, x, gamma, rstd});
  const std::int64_t nh = std::int64_t(n) * h;
  if (!dx.data && !dgamma.data) throw std::invalid_argument("rmsnorm_backward: neither dx nor dgamma asked for");
  detail::need_optional(k, "dx", dx, nh), detail::need(k, "dy", dy, nh), detail::need(k, "x", x, nh);
  detail::need_optional(k, "dgamma", dgamma, h), detail::need(k, "gamma", gamma, h);
  detail::need(k, "rstd", rstd, n);
  if (on_device(dy))  // dx may be absent (the weight gradients alone)
    return device_kernels_for("rmsnorm_backward", dy).rmsnorm_backward(dx, dgamma, dy, x, gamma,
        rstd, n, h, zero_centered_gamma, accumulate_dx);
  detail::fp32_stage stage;
  dispatch_compute(k, dy.type, dy.where, [&](auto zero) {
    using T = decltype(zero);
    T* dx_out = !dx.data ? nullptr : accumulate_dx ? stage.typed<T>(dx) : stage.output<T>(dx, nh);
    rmsnorm_backward<T>(dx_out, stage.typed<T>(dgamma), stage.typed<T>(dy),
                        stage.typed<T>(x), stage.typed<T>(gamma), stage.typed<T>(rstd), n,
                        h, zero_centered_gamma, accumulate_dx);
  });
}

}  // namespace mactor::kernels
