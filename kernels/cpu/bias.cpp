// Bias add and column-sum backward.
#include "kernels/bias.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <cstdint>

#include "kernels/cpu/row_reduction.hpp"

namespace mactor::kernels {

template <typename T>
void bias_add(T* y, const T* bias, int n, int w) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * w > 32768)
  for (int i = 0; i < n; ++i) {
    T* yi = y + std::int64_t(i) * w;
    for (int j = 0; j < w; ++j) yi[j] += bias[j];
  }
}

template <typename T>
void bias_backward(T* dbias, const T* dy, int n, int w) {
  const int threads = std::int64_t(n) * w > 32768 ? omp_get_max_threads() : 1;
  detail::row_reduction<T> partial(threads, w);
#pragma omp parallel num_threads(threads)
  {
    T* p = partial.slot(omp_get_thread_num());
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const T* di = dy + std::int64_t(i) * w;
      for (int j = 0; j < w; ++j) p[j] += di[j];
    }
  }
  partial.add_to(dbias, threads);
}

template void bias_add<float>(float*, const float*, int, int);
template void bias_add<double>(double*, const double*, int, int);
template void bias_backward<float>(float*, const float*, int, int);
template void bias_backward<double>(double*, const double*, int, int);


void bias_add(tensor::tensor_view y, tensor::const_tensor_view bias, int n, int w) {
  check_compatible("bias_add", {y, bias});
  detail::need("bias_add", "y", y, std::int64_t(n) * w);
  detail::need("bias_add", "bias", bias, w);
  if (on_device(y)) return device_kernels_for("bias_add", y).bias_add(y, bias, n, w);
  detail::fp32_stage stage;
  dispatch_compute("bias_add", y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    bias_add<T>(stage.typed<T>(y), stage.typed<T>(bias), n, w);
  });
}

void bias_backward(tensor::tensor_view dbias, tensor::const_tensor_view dy, int n, int w) {
  check_compatible("bias_backward", {dbias, dy});
  detail::need("bias_backward", "dbias", dbias, w);
  detail::need("bias_backward", "dy", dy, std::int64_t(n) * w);
  if (on_device(dbias)) return device_kernels_for("bias_backward", dbias).bias_backward(dbias, dy, n, w);
  detail::fp32_stage stage;
  dispatch_compute("bias_backward", dy.type, dy.where, [&](auto zero) {
    using T = decltype(zero);
    bias_backward<T>(stage.typed<T>(dbias), stage.typed<T>(dy), n, w);
  });
}

}  // namespace mactor::kernels
