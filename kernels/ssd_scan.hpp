// Mamba-2's selective state-space scan in its chunked "state-space duality" form (SSD): inside a
// chunk the output is a masked quadratic form (GEMMs), between chunks only the [p, n] state of
// each head is passed on. Semantics of mamba_ssm's mamba_chunk_scan_combined with
// dt_softplus=True, a dt_bias, D per head, no initial state, B and C shared by the heads of a group.
#pragma once
#include <cstdint>

#include "kernels/ssd_shape.hpp"
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// Per step t and head: dt = softplus(dt_raw + dt_bias), A = -exp(A_log),
///   h_t = exp(dt A) h_{t-1} + dt x_t B_t^T,  y_t = h_t C_t + D x_t,  h_{-1} = 0.
/// x, y: [b, l, h, p]; dt_raw: [b, l, h]; B, C: [b, l, g, n]; dt_bias, A_log, D: [h].
/// states: [b, h, chunks, p, n], the state entering each chunk (saved for the backward).
template <typename T>
void ssd_scan_forward(T* y, T* states, const T* x, const T* dt_raw, const T* A_log, const T* B,
                      const T* C, const T* D, const T* dt_bias, const ssd_shape& s);

/// Gradients of the forward above given dy. dx, ddt_raw, dB, dC are written (=);
/// dA_log, dD, ddt_bias are accumulated (+=), as parameter gradients are.
template <typename T>
void ssd_scan_backward(T* dx, T* ddt_raw, T* dA_log, T* dB, T* dC, T* dD, T* ddt_bias,
                       const T* dy, const T* states, const T* x, const T* dt_raw,
                       const T* A_log, const T* B, const T* C, const T* D, const T* dt_bias,
                       const ssd_shape& s);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void ssd_scan_forward(tensor::tensor_view y, tensor::tensor_view states,
                      tensor::const_tensor_view x, tensor::const_tensor_view dt_raw,
                      tensor::const_tensor_view A_log, tensor::const_tensor_view B,
                      tensor::const_tensor_view C, tensor::const_tensor_view D,
                      tensor::const_tensor_view dt_bias, const ssd_shape& s);
void ssd_scan_backward(tensor::tensor_view dx, tensor::tensor_view ddt_raw,
                       tensor::tensor_view dA_log, tensor::tensor_view dB, tensor::tensor_view dC,
                       tensor::tensor_view dD, tensor::tensor_view ddt_bias,
                       tensor::const_tensor_view dy, tensor::const_tensor_view states,
                       tensor::const_tensor_view x, tensor::const_tensor_view dt_raw,
                       tensor::const_tensor_view A_log, tensor::const_tensor_view B,
                       tensor::const_tensor_view C, tensor::const_tensor_view D,
                       tensor::const_tensor_view dt_bias, const ssd_shape& s);

}  // namespace mactor::kernels
