// SwiGLU as Megatron computes it: the fc1 output row is [gate | up] (torch.chunk(x, 2, -1)),
// and the activation is silu(gate) * up.
#pragma once
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// y[n, f] = silu(x[n, 0:f]) * x[n, f:2f]
template <typename T>
void swiglu_forward(T* y, const T* x, int n, int f);

/// dx[n, 2f] from dy[n, f] and the forward input x[n, 2f].
template <typename T>
void swiglu_backward(T* dx, const T* dy, const T* x, int n, int f);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void swiglu_forward(tensor::tensor_view y, tensor::const_tensor_view x, int n, int f);
void swiglu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                     tensor::const_tensor_view x, int n, int f);

}  // namespace mactor::kernels
