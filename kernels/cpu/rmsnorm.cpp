// RMSNorm forward/backward; the mean square is accumulated in double for float inputs.
#include "kernels/rmsnorm.hpp"
#include "kernels/cpu/typed.hpp"

#include <cmath>
#include <cstdint>

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
  detail::row_reduction<T> dg(threads, h);
#pragma omp parallel num_threads(threads)
  {
    T* dg_t = dg.slot(omp_get_thread_num());
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const T* xi = x + std::int64_t(i) * h;
      const T* gi = dy + std::int64_t(i) * h;
      T* dxi = dx + std::int64_t(i) * h;
      const T r = rstd[i];
      T sum_gx = 0;
      for (int j = 0; j < h; ++j) {
        const T xhat = xi[j] * r;
        sum_gx += gi[j] * (gamma[j] + shift) * xhat;
        dg_t[j] += gi[j] * xhat;
      }
      const T mean_gx = sum_gx / h;
      for (int j = 0; j < h; ++j) {
        const T v = r * (gi[j] * (gamma[j] + shift) - xi[j] * r * mean_gx);
        dxi[j] = accumulate_dx ? dxi[j] + v : v;
      }
    }
  }
  dg.add_to(dgamma, threads);
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
  detail::need(k, "dx", dx, nh), detail::need(k, "dy", dy, nh), detail::need(k, "x", x, nh);
  detail::need(k, "dgamma", dgamma, h), detail::need(k, "gamma", gamma, h);
  detail::need(k, "rstd", rstd, n);
  detail::fp32_stage stage;
  dispatch_compute(k, dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    rmsnorm_backward<T>(accumulate_dx ? stage.typed<T>(dx) : stage.output<T>(dx, nh), stage.typed<T>(dgamma), stage.typed<T>(dy),
                        stage.typed<T>(x), stage.typed<T>(gamma), stage.typed<T>(rstd), n,
                        h, zero_centered_gamma, accumulate_dx);
  });
}

}  // namespace mactor::kernels
