// Squared ReLU forward/backward: element-wise loops the compiler vectorizes.
#include "kernels/squared_relu.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

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

template <typename T>
void weighted_squared_relu_forward(T* y, const T* x, const T* w, std::int64_t rows, int width) {
#pragma omp parallel for schedule(static) if (rows * width > 65536)
  for (std::int64_t i = 0; i < rows; ++i)
    for (int j = 0; j < width; ++j) {
      const T r = std::max(x[i * width + j], T(0));
      y[i * width + j] = r * r * w[i];
    }
}

// As Megatron's weighted_squared_relu_back: the input's gradient from (dy * w) * 2 relu(x), the
// weight's from the row sum of relu(x)^2 dy.
template <typename T>
void weighted_squared_relu_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, std::int64_t rows, int width) {
#pragma omp parallel for schedule(static) if (rows * width > 65536)
  for (std::int64_t i = 0; i < rows; ++i) {
    T sum = 0;
    for (int j = 0; j < width; ++j) {
      const std::int64_t k = i * width + j;
      const T r = std::max(x[k], T(0));
      sum += r * r * dy[k];
      dx[k] = dy[k] * w[i] * T(2) * r;
    }
    dw[i] = sum;
  }
}

template void squared_relu_forward<float>(float*, const float*, std::int64_t);
template void squared_relu_forward<double>(double*, const double*, std::int64_t);
template void squared_relu_backward<float>(float*, const float*, const float*, std::int64_t);
template void squared_relu_backward<double>(double*, const double*, const double*, std::int64_t);
template void weighted_squared_relu_forward<float>(float*, const float*, const float*, std::int64_t, int);
template void weighted_squared_relu_forward<double>(double*, const double*, const double*, std::int64_t, int);
template void weighted_squared_relu_backward<float>(float*, float*, const float*, const float*, const float*,
                                                    std::int64_t, int);
template void weighted_squared_relu_backward<double>(double*, double*, const double*, const double*, const double*,
                                                     std::int64_t, int);

void squared_relu_forward(tensor::tensor_view y, tensor::const_tensor_view x, std::int64_t n) {
  check_compatible("squared_relu_forward", {y, x});
  detail::need("squared_relu_forward", "y", y, n);
  detail::need("squared_relu_forward", "x", x, n);
  if (on_device(y))
    return device_kernels_for("squared_relu_forward", y).squared_relu_forward(y, x, n);
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
  if (on_device(dx))
    return device_kernels_for("squared_relu_backward", dx).squared_relu_backward(dx, dy, x, n);
  detail::fp32_stage stage;
  dispatch_compute("squared_relu_backward", dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    squared_relu_backward<T>(stage.output<T>(dx, n), stage.typed<T>(dy), stage.typed<T>(x), n);
  });
}

void weighted_squared_relu_forward(tensor::tensor_view y, tensor::const_tensor_view x, tensor::const_tensor_view w,
                                   std::int64_t rows, int width) {
  const std::int64_t n = rows * width;
  check_compatible("weighted_squared_relu_forward", {y, x, w});
  detail::need("weighted_squared_relu_forward", "y", y, n);
  detail::need("weighted_squared_relu_forward", "x", x, n);
  detail::need("weighted_squared_relu_forward", "w", w, rows);
  detail::fp32_stage stage;
  dispatch_compute("weighted_squared_relu_forward", y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    weighted_squared_relu_forward<T>(stage.output<T>(y, n), stage.typed<T>(x), stage.typed<T>(w), rows, width);
  });
}

void weighted_squared_relu_backward(tensor::tensor_view dx, tensor::tensor_view dw, tensor::const_tensor_view dy,
                                    tensor::const_tensor_view x, tensor::const_tensor_view w, std::int64_t rows,
                                    int width) {
  const std::int64_t n = rows * width;
  check_compatible("weighted_squared_relu_backward", {dx, dw, dy, x, w});
  detail::need("weighted_squared_relu_backward", "dx", dx, n);
  detail::need("weighted_squared_relu_backward", "dy", dy, n);
  detail::need("weighted_squared_relu_backward", "x", x, n);
  detail::need("weighted_squared_relu_backward", "w", w, rows);
  detail::need("weighted_squared_relu_backward", "dw", dw, rows);
  detail::fp32_stage stage;
  dispatch_compute("weighted_squared_relu_backward", dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    weighted_squared_relu_backward<T>(stage.output<T>(dx, n), stage.output<T>(dw, rows), stage.typed<T>(dy),
                                      stage.typed<T>(x), stage.typed<T>(w), rows, width);
  });
}

}  // namespace mactor::kernels
