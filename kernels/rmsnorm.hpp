// RMSNorm over the last dimension (Llama-style), with the same zero-centered gamma option.
#pragma once
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// y[n, h] = x * rstd * g, rstd = 1 / sqrt(mean(x^2) + eps), g = gamma (+1 when zero-centered).
/// rstd: [n], saved for the backward.
template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* gamma, int n, int h, T eps,
                     bool zero_centered_gamma);

/// dx[n, h] (= or += when accumulate_dx), dgamma[h] +=. Either may be null (the other alone, as
/// a zero-bubble backward splits them); each part is computed exactly as when both are.
template <typename T>
void rmsnorm_backward(T* dx, T* dgamma, const T* dy, const T* x, const T* gamma, const T* rstd,
                      int n, int h, bool zero_centered_gamma, bool accumulate_dx);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked; dx or
// dgamma (not both) may be an empty view.
void rmsnorm_forward(tensor::tensor_view y, tensor::tensor_view rstd, tensor::const_tensor_view x,
                     tensor::const_tensor_view gamma, int n, int h, double eps,
                     bool zero_centered_gamma);
void rmsnorm_backward(tensor::tensor_view dx, tensor::tensor_view dgamma,
                      tensor::const_tensor_view dy, tensor::const_tensor_view x,
                      tensor::const_tensor_view gamma, tensor::const_tensor_view rstd, int n,
                      int h, bool zero_centered_gamma, bool accumulate_dx);

}  // namespace mactor::kernels
