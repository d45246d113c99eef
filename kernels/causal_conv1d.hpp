// Causal depthwise 1-d convolution over the sequence with SiLU, as Mamba's conv1d over xBC
// (torch's Conv1d with groups = channels, padding = width - 1, cut to the first l outputs).
#pragma once
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// y[b, t, c] = act(bias[c] + sum_k w[c, k] x[b, t - (width - 1) + k, c]), x before 0 read as 0.
/// x, y: [batch, seq, channels] (channels innermost); w: [channels, width]; bias may be null;
/// act is SiLU when silu, else the identity.
template <typename T>
void causal_conv1d_forward(T* y, const T* x, const T* w, const T* bias, int batch, int seq,
                           int channels, int width, bool silu);

/// dx (=), dw (+=), dbias (+=, skipped when null) from dy; the pre-activation is recomputed. dx,
/// or dw with dbias, may be null (a zero-bubble backward's split); each part is computed exactly as
/// when both are.
template <typename T>
void causal_conv1d_backward(T* dx, T* dw, T* dbias, const T* dy, const T* x, const T* w,
                            const T* bias, int batch, int seq, int channels, int width,
                            bool silu);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void causal_conv1d_forward(tensor::tensor_view y, tensor::const_tensor_view x,
                           tensor::const_tensor_view w, tensor::const_tensor_view bias, int batch,
                           int seq, int channels, int width, bool silu);
void causal_conv1d_backward(tensor::tensor_view dx, tensor::tensor_view dw,
                            tensor::tensor_view dbias, tensor::const_tensor_view dy,
                            tensor::const_tensor_view x, tensor::const_tensor_view w,
                            tensor::const_tensor_view bias, int batch, int seq, int channels,
                            int width, bool silu);

}  // namespace mactor::kernels
