// GeLU: exact (erf, torch.nn.functional.gelu, Megatron-Core's default activation) or the tanh
// approximation (Megatron's fused bias-gelu and --openai-gelu use it).
#pragma once
#include <cstdint>

namespace mactor::kernels {

/// y[n] = gelu(x[n]); y may alias x.
template <typename T>
void gelu_forward(T* y, const T* x, std::int64_t n, bool tanh_approximation);

/// dx[n] = dy[n] * gelu'(x[n]); dx may alias dy.
template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t n, bool tanh_approximation);

}  // namespace mactor::kernels
