// Squared ReLU forward/backward: element-wise loops the compiler vectorizes.
#include "kernels/squared_relu.hpp"
#include "kernels/cpu/typed.hpp"

#include <algorithm>

namespace mactor::kernels {

template <typename T>
void squared_relu_forward(T* y, const T* x, std::int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    const T r = std::max(x[i], T(0));
    y[i] = r * r;
  }
}

template <typename T>
void squared_relu_backward(T* dx, const T* dy, const T* x, std::int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * T(2) * std::max(x[i], T(0));
}

template void squared_relu_forward<float>(float*, const float*, std::int64_t);
template void squared_relu_forward<double>(double*, const double*, std::int64_t);
template void squared_relu_backward<float>(float*, const float*, const float*, std::int64_t);
template void squared_relu_backward<double>(double*, const double*, const double*, std::int64_t);

void squared_relu_forward(tensor::tensor_view y, tensor::const_tensor_view x, std::int64_t n) {
  check_compatible("squared_relu_forward", {y, x});
  detail::need("squared_relu_forward", "y", y, n);
  detail::need("squared_relu_forward", "x", x, n);
  detail::fp32_stage stage;
  dispatch_compute("squared_relu_forward", y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    squared_relu_forward<T>(stage.output<T>(y, n), stage.typed<T>(x), n);
  });
}

void squared_relu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                           tensor::const_tensor_view x, std::int64_t n) {
  check_compatible("squared_relu_backward", {dx, dy, x});
  detail::need("squared_relu_backward", "dx", dx, n);
  detail::need("squared_relu_backward", "dy", dy, n);
  detail::need("squared_relu_backward", "x", x, n);
  detail::fp32_stage stage;
  dispatch_compute("squared_relu_backward", dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    squared_relu_backward<T>(stage.output<T>(dx, n), stage.typed<T>(dy), stage.typed<T>(x), n);
  });
}

}  // namespace mactor::kernels
