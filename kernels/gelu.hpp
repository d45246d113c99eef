// GeLU: exact (erf, torch.nn.functional.gelu, Megatron-Core's default activation) or the tanh
// approximation (Megatron's fused bias-gelu and --openai-gelu use it).
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// y[n] = gelu(x[n]); y may alias x.
template <typename T>
void gelu_forward(T* y, const T* x, std::int64_t n, bool tanh_approximation);

/// dx[n] = dy[n] * gelu'(x[n]); dx may alias dy.
template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n, bool tanh_approximation);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void gelu_forward(tensor::tensor_view y, tensor::const_tensor_view x, std::int64_t n,
                  bool tanh_approximation);
void gelu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                   tensor::const_tensor_view x, std::int64_t n, bool tanh_approximation);

}  // namespace mactor::kernels
