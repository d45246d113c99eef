// Causal depthwise 1-d convolution over the sequence with SiLU, as Mamba's conv1d over xBC
// (torch's Conv1d with groups = channels, padding = width - 1, cut to the first l outputs).
#pragma once

namespace mactor::kernels {

/// y[b, t, c] = act(bias[c] + sum_k w[c, k] x[b, t - (width - 1) + k, c]), x before 0 read as 0.
/// x, y: [batch, seq, channels] (channels innermost); w: [channels, width]; bias may be null;
/// act is SiLU when silu, else the identity.
template <typename T>
void causal_conv1d_forward(T* y, const T* x, const T* w, const T* bias, int batch, int seq,
                           int channels, int width, bool silu);

/// dx (=), dw (+=), dbias (+=, skipped when null) from dy; the pre-activation is recomputed.
template <typename T>
void causal_conv1d_backward(T* dx, T* dw, T* dbias, const T* dy, const T* x, const T* w,
                            const T* bias, int batch, int seq, int channels, int width,
                            bool silu);

}  // namespace mactor::kernels
