// Bias add over rows and its backward (column sums).
#pragma once
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// y[n, w] += bias[w]
template <typename T>
void bias_add(T* y, const T* bias, int n, int w);

/// dbias[w] += sum over rows of dy[n, w]
template <typename T>
void bias_backward(T* dbias, const T* dy, int n, int w);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void bias_add(tensor::tensor_view y, tensor::const_tensor_view bias, int n, int w);
void bias_backward(tensor::tensor_view dbias, tensor::const_tensor_view dy, int n, int w);

}  // namespace mactor::kernels
