// Squared ReLU (Megatron's --squared-relu, Primer's activation): y = relu(x)^2.
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// y[n] = max(x[n], 0)^2; y may alias x.
template <typename T>
void squared_relu_forward(T* y, const T* x, std::int64_t n);

/// dx[n] = dy[n] * 2 max(x[n], 0); dx may alias dy.
template <typename T>
void squared_relu_backward(T* dx, const T* dy, const T* x, std::int64_t n);

// Tensor entry points: dispatch on dtype and device, sizes checked.
void squared_relu_forward(tensor::tensor_view y, tensor::const_tensor_view x, std::int64_t n);
void squared_relu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                           tensor::const_tensor_view x, std::int64_t n);

}  // namespace mactor::kernels
