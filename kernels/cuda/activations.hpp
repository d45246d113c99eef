// SwiGLU and GeLU on a CUDA device: kernels/swiglu.hpp's and kernels/gelu.hpp's contracts,
// fp32, pointers into device memory, queued on stream s.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// y[n, f] = silu(x[n, 0:f]) * x[n, f:2f]
void swiglu_forward(float* y, const float* x, int n, int f, stream_handle s = nullptr);
/// dx[n, 2f] from dy[n, f] and the forward input x[n, 2f].
void swiglu_backward(float* dx, const float* dy, const float* x, int n, int f, stream_handle s = nullptr);

/// y[n] = gelu(x[n]) (erf form, or tanh's approximation); y may alias x.
void gelu_forward(float* y, const float* x, std::int64_t n, bool tanh_approximation, stream_handle s = nullptr);
/// dx[n] = dy[n] * gelu'(x[n]); dx may alias dy.
void gelu_backward(float* dx, const float* dy, const float* x, std::int64_t n, bool tanh_approximation,
                   stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
