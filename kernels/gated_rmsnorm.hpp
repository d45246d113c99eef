// Mamba-2's gated RMSNorm (mamba_ssm's RMSNormGated with norm_before_gate=False, as Megatron's
// MambaMixer uses it): the gate multiplies first, then RMSNorm runs over groups of the width.
#pragma once
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// g = x * silu(z); y[n, d] = g * rstd * weight with rstd = 1 / sqrt(mean(g^2) + eps) taken over
/// each group of group_size consecutive columns (group_size divides d). rstd: [n, d / group_size].
template <typename T>
void gated_rmsnorm_forward(T* y, T* rstd, const T* x, const T* z, const T* weight, int n, int d,
                           int group_size, T eps);

/// dx, dz (=), dweight (+=), from dy and the forward's rstd. dx with dz, or dweight, may be null
/// (a zero-bubble backward's split); each part is computed exactly as when both are.
template <typename T>
void gated_rmsnorm_backward(T* dx, T* dz, T* dweight, const T* dy, const T* x, const T* z,
                            const T* weight, const T* rstd, int n, int d, int group_size);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void gated_rmsnorm_forward(tensor::tensor_view y, tensor::tensor_view rstd,
                           tensor::const_tensor_view x, tensor::const_tensor_view z,
                           tensor::const_tensor_view weight, int n, int d, int group_size,
                           double eps);
void gated_rmsnorm_backward(tensor::tensor_view dx, tensor::tensor_view dz,
                            tensor::tensor_view dweight, tensor::const_tensor_view dy,
                            tensor::const_tensor_view x, tensor::const_tensor_view z,
                            tensor::const_tensor_view weight, tensor::const_tensor_view rstd,
                            int n, int d, int group_size);

}  // namespace mactor::kernels
