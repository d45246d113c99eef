// Gated grouped RMSNorm forward/backward; the gated value g = x silu(z) is recomputed in the
// backward rather than saved.
#include "kernels/gated_rmsnorm.hpp"

#include <stdexcept>

#include <omp.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/row_reduction.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

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
  detail::row_reduction<T> dw(dweight ? threads : 0, d);
#pragma omp parallel num_threads(threads)
  {
    T* dw_t = dweight ? dw.slot(omp_get_thread_num()) : nullptr;
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
          if (dw_t) dw_t[j] += dy[row + j] * ghat;
        }
        if (!dx) continue;
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
  if (dweight) dw.add_to(dweight, threads);
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

void gated_rmsnorm_forward(tensor::tensor_view y, tensor::tensor_view rstd,
                           tensor::const_tensor_view x, tensor::const_tensor_view z,
                           tensor::const_tensor_view weight, int n, int d, int group_size,
                           double eps) {
  const char* k = "gated_rmsnorm_forward";
  check_compatible(k, {y, rstd, x, z, weight});
  const std::int64_t nd = std::int64_t(n) * d;
  detail::need(k, "y", y, nd), detail::need(k, "x", x, nd), detail::need(k, "z", z, nd);
  detail::need(k, "rstd", rstd, nd / group_size), detail::need(k, "weight", weight, d);
  if (on_device(y)) return device_kernels_for(k, y).gated_rmsnorm_forward(y, rstd, x, z, weight, n, d, group_size, eps);
  detail::fp32_stage stage;
  dispatch_compute(k, y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    gated_rmsnorm_forward<T>(stage.output<T>(y, nd), stage.output<T>(rstd, nd / group_size),
                             stage.typed<T>(x), stage.typed<T>(z), stage.typed<T>(weight), n, d,
                             group_size, T(eps));
  });
}

void gated_rmsnorm_backward(tensor::tensor_view dx, tensor::tensor_view dz,
                            tensor::tensor_view dweight, tensor::const_tensor_view dy,
                            tensor::const_tensor_view x, tensor::const_tensor_view z,
                            tensor::const_tensor_view weight, tensor::const_tensor_view rstd,
                            int n, int d, int group_size) {
  const char* k = "gated_rmsnorm_backward";
  check_compatible(k, {dx, dz, dweight, dy, x, z, weight, rstd});
  const std::int64_t nd = std::int64_t(n) * d;
  if ((dx.data == nullptr) != (dz.data == nullptr))
    throw std::invalid_argument("gated_rmsnorm_backward: dx and dz go together");
  if (!dx.data && !dweight.data) throw std::invalid_argument("gated_rmsnorm_backward: neither dx nor dweight asked for");
  detail::need_optional(k, "dx", dx, nd), detail::need_optional(k, "dz", dz, nd), detail::need(k, "dy", dy, nd);
  detail::need(k, "x", x, nd), detail::need(k, "z", z, nd);
  detail::need_optional(k, "dweight", dweight, d), detail::need(k, "weight", weight, d);
  detail::need(k, "rstd", rstd, nd / group_size);
  if (on_device(dy))
    return device_kernels_for(k, dy).gated_rmsnorm_backward(dx, dz, dweight, dy, x, z, weight, rstd, n, d, group_size);
  detail::fp32_stage stage;
  dispatch_compute(k, dy.type, dy.where, [&](auto zero) {
    using T = decltype(zero);
    gated_rmsnorm_backward<T>(stage.output<T>(dx, nd), stage.output<T>(dz, nd),
                              stage.typed<T>(dweight), stage.typed<T>(dy), stage.typed<T>(x),
                              stage.typed<T>(z), stage.typed<T>(weight), stage.typed<T>(rstd), n,
                              d, group_size);
  });
}

}  // namespace mactor::kernels
