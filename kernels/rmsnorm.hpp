// RMSNorm over the last dimension (Llama-style), with the same zero-centered gamma option.
#pragma once

namespace mactor::kernels {

/// y[n, h] = x * rstd * g, rstd = 1 / sqrt(mean(x^2) + eps), g = gamma (+1 when zero-centered).
/// rstd: [n], saved for the backward.
template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* gamma, int n, int h, T eps,
                     bool zero_centered_gamma);

/// dx[n, h] (= or += when accumulate_dx), dgamma[h] +=.
template <typename T>
void rmsnorm_backward(T* dx, T* dgamma, const T* dy, const T* x, const T* gamma, const T* rstd,
                      int n, int h, bool zero_centered_gamma, bool accumulate_dx);

}  // namespace mactor::kernels
