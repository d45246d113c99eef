// Multi-latent attention's rotary embedding on a CUDA device: kernels/mla_rope.hpp's
// mla_rope_apply contract (pairs in, halves out; the transpose with inverse), fp32, x and the
// cos/sin tables in device memory, with the CPU kernel's roundings (no fused multiply-adds), so
// the results are its bits.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// Rotates in place the vectors of x viewed as [seq, batch, heads] (vector (s, b, h) at
/// (s * batch + b) * row_stride + h * head_stride + offset) with row s of cos, sin
/// ([seq, rot_dim / 2]).
void mla_rope_apply(float* x, const float* cos, const float* sin, int seq, int batch, int heads,
                    std::int64_t row_stride, std::int64_t head_stride, std::int64_t offset, int rot_dim,
                    bool inverse, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
