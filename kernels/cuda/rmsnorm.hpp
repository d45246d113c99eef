// RMSNorm on a CUDA device: kernels/rmsnorm.hpp's contract, fp32, pointers into device memory,
// queued on stream s.
#pragma once
#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// y[n, h] = x * rstd * g, rstd[n] = 1 / sqrt(mean(x^2) + eps), g = gamma (+1 when zero-centered).
void rmsnorm_forward(float* y, float* rstd, const float* x, const float* gamma, int n, int h, float eps,
                     bool zero_centered_gamma, stream_handle s = nullptr);

/// dx[n, h] (= or += when accumulate_dx), dgamma[h] += (summed in a fixed order: deterministic).
/// Either may be null (a zero-bubble backward's split); each part is computed as when both are.
void rmsnorm_backward(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                      const float* rstd, int n, int h, bool zero_centered_gamma, bool accumulate_dx,
                      stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
