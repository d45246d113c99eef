// LayerNorm on a CUDA device: kernels/layernorm.hpp's contract, fp32, pointers into device
// memory, queued on stream s.
#pragma once
#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// y[n, h] = (x - mean) * rstd * g + beta, g = gamma (+1 when zero_centered_gamma); beta may be
/// null. mean, rstd: [n], saved for the backward.
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                       int n, int h, float eps, bool zero_centered_gamma, stream_handle s = nullptr);

/// dx[n, h] (= or += when accumulate_dx), dgamma[h] +=, dbeta[h] += (dbeta may be null); the
/// weight gradients are summed in a fixed order (deterministic). dx, or dgamma with dbeta, may be
/// null (a zero-bubble backward's split); each part is computed as when both are.
void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int n, int h,
                        bool zero_centered_gamma, bool accumulate_dx, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
