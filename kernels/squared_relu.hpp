// Squared ReLU (Megatron's --squared-relu, Primer's activation): y = relu(x)^2, and its weighted
// form, Megatron's fused weighted_squared_relu (--use-fused-weighted-squared-relu): y = relu(x)^2 * w
// per row, computed in fp32 and rounded once as torch.compile's fused kernel computes it.
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

/// y[i, j] = relu(x[i, j])^2 * w[i] for a [rows, width] x.
template <typename T>
void weighted_squared_relu_forward(T* y, const T* x, const T* w, std::int64_t rows, int width);

/// dx[i, j] = dy[i, j] * w[i] * 2 relu(x[i, j]); dw[i] = sum_j relu(x[i, j])^2 dy[i, j].
template <typename T>
void weighted_squared_relu_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, std::int64_t rows, int width);

// Tensor entry points: dispatch on dtype and device, sizes checked.
void squared_relu_forward(tensor::tensor_view y, tensor::const_tensor_view x, std::int64_t n);
void squared_relu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                           tensor::const_tensor_view x, std::int64_t n);
/// y and x [rows, width] of one dtype; w [rows] of its own (16-bit y and x compute in fp32).
void weighted_squared_relu_forward(tensor::tensor_view y, tensor::const_tensor_view x, tensor::const_tensor_view w,
                                   std::int64_t rows, int width);
/// dx, dy, x [rows, width]; dw, w [rows], dw written in w's dtype.
void weighted_squared_relu_backward(tensor::tensor_view dx, tensor::tensor_view dw, tensor::const_tensor_view dy,
                                    tensor::const_tensor_view x, tensor::const_tensor_view w, std::int64_t rows,
                                    int width);

}  // namespace mactor::kernels
