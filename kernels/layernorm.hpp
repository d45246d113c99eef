// LayerNorm over the last dimension, with Megatron's zero-centered gamma option
// (--apply-layernorm-1p: the stored weight w is used as 1 + w).
#pragma once
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// y[n, h] = (x - mean) * rstd * g + beta, g = gamma (+1 when zero_centered_gamma).
/// beta may be null (no bias). mean, rstd: [n], saved for the backward.
template <typename T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int n,
                       int h, T eps, bool zero_centered_gamma);

/// dx[n, h] (= or += when accumulate_dx), dgamma[h] +=, dbeta[h] += (dbeta may be null). dx may be
/// null (the weight gradients alone, a zero-bubble W pass), or dgamma and dbeta (the input
/// gradient alone); each part is computed exactly as when both are asked for.
template <typename T>
void layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* gamma,
                        const T* mean, const T* rstd, int n, int h, bool zero_centered_gamma,
                        bool accumulate_dx);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked;
// beta and dbeta may be empty views, and dx or dgamma (not both; dbeta only with dgamma).
void layernorm_forward(tensor::tensor_view y, tensor::tensor_view mean, tensor::tensor_view rstd,
                       tensor::const_tensor_view x, tensor::const_tensor_view gamma,
                       tensor::const_tensor_view beta, int n, int h, double eps,
                       bool zero_centered_gamma);
void layernorm_backward(tensor::tensor_view dx, tensor::tensor_view dgamma,
                        tensor::tensor_view dbeta, tensor::const_tensor_view dy,
                        tensor::const_tensor_view x, tensor::const_tensor_view gamma,
                        tensor::const_tensor_view mean, tensor::const_tensor_view rstd, int n,
                        int h, bool zero_centered_gamma, bool accumulate_dx);

}  // namespace mactor::kernels
