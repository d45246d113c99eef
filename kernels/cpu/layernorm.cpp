// LayerNorm forward/backward; statistics are accumulated in double for float inputs.
#include "kernels/layernorm.hpp"

#include <cmath>
#include <cstdint>

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
  detail::row_reduction<T> dg(threads, h), db(threads, h);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    T* dg_t = dg.slot(t);
    T* db_t = db.slot(t);
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const T* xi = x + std::int64_t(i) * h;
      const T* gi = dy + std::int64_t(i) * h;
      T* dxi = dx + std::int64_t(i) * h;
      const T m = mean[i], r = rstd[i];
      T sum_g = 0, sum_gx = 0;
      for (int j = 0; j < h; ++j) {
        const T xhat = (xi[j] - m) * r;
        const T g = gi[j] * (gamma[j] + shift);
        sum_g += g;
        sum_gx += g * xhat;
        dg_t[j] += gi[j] * xhat;
        db_t[j] += gi[j];
      }
      const T mean_g = sum_g / h, mean_gx = sum_gx / h;
      for (int j = 0; j < h; ++j) {
        const T xhat = (xi[j] - m) * r;
        const T v = r * (gi[j] * (gamma[j] + shift) - mean_g - xhat * mean_gx);
        dxi[j] = accumulate_dx ? dxi[j] + v : v;
      }
    }
  }
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

}  // namespace mactor::kernels
