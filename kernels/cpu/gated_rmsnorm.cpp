// Gated grouped RMSNorm forward/backward; the gated value g = x silu(z) is recomputed in the
// backward rather than saved.
#include "kernels/gated_rmsnorm.hpp"

#include <omp.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/row_reduction.hpp"

namespace mactor::kernels {
namespace {

template <typename T>
T sigmoid(T u) {
  return T(1) / (T(1) + std::exp(-u));
}

}  // namespace

template <typename T>
void gated_rmsnorm_forward(T* y, T* rstd, const T* x, const T* z, const T* weight, int n, int d,
                           int group_size, T eps) {
  const int groups = d / group_size;
#pragma omp parallel for schedule(static) if (std::int64_t(n) * d > 16384)
  for (int i = 0; i < n; ++i) {
    const std::int64_t row = std::int64_t(i) * d;
    for (int g = 0; g < groups; ++g) {
      const int j0 = g * group_size;
      double sq = 0;
      for (int j = j0; j < j0 + group_size; ++j) {
        const T gated = x[row + j] * z[row + j] * sigmoid(z[row + j]);
        y[row + j] = gated;
        sq += double(gated) * gated;
      }
      const T r = T(1.0 / std::sqrt(sq / group_size + double(eps)));
      rstd[std::int64_t(i) * groups + g] = r;
      for (int j = j0; j < j0 + group_size; ++j) y[row + j] *= r * weight[j];
    }
  }
}

template <typename T>
void gated_rmsnorm_backward(T* dx, T* dz, T* dweight, const T* dy, const T* x, const T* z,
                            const T* weight, const T* rstd, int n, int d, int group_size) {
  const int groups = d / group_size;
  const int threads = std::int64_t(n) * d > 16384 ? omp_get_max_threads() : 1;
  detail::row_reduction<T> dw(threads, d);
#pragma omp parallel num_threads(threads)
  {
    T* dw_t = dw.slot(omp_get_thread_num());
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const std::int64_t row = std::int64_t(i) * d;
      for (int g = 0; g < groups; ++g) {
        const int j0 = g * group_size;
        const T r = rstd[std::int64_t(i) * groups + g];
        T sum = 0;  // sum_j dy_j w_j ghat_j
        for (int j = j0; j < j0 + group_size; ++j) {
          const T ghat = x[row + j] * z[row + j] * sigmoid(z[row + j]) * r;
          sum += dy[row + j] * weight[j] * ghat;
          dw_t[j] += dy[row + j] * ghat;
        }
        const T mean = sum / group_size;
        for (int j = j0; j < j0 + group_size; ++j) {
          const T s = sigmoid(z[row + j]), silu = z[row + j] * s;
          const T ghat = x[row + j] * silu * r;
          const T dg = r * (dy[row + j] * weight[j] - ghat * mean);
          dx[row + j] = dg * silu;
          dz[row + j] = dg * x[row + j] * s * (T(1) + z[row + j] * (T(1) - s));
        }
      }
    }
  }
  dw.add_to(dweight, threads);
}

template void gated_rmsnorm_forward<float>(float*, float*, const float*, const float*,
                                           const float*, int, int, int, float);
template void gated_rmsnorm_forward<double>(double*, double*, const double*, const double*,
                                            const double*, int, int, int, double);
template void gated_rmsnorm_backward<float>(float*, float*, float*, const float*, const float*,
                                            const float*, const float*, const float*, int, int,
                                            int);
template void gated_rmsnorm_backward<double>(double*, double*, double*, const double*,
                                             const double*, const double*, const double*,
                                             const double*, int, int, int);

}  // namespace mactor::kernels
