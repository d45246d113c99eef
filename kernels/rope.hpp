// Rotary position embedding in Megatron-Core's default (non-interleaved) layout: the first
// rot_dim channels of each head are two halves (x1, x2) rotated as (x1 cos - x2 sin,
// x2 cos + x1 sin); channels past rot_dim (--rotary-percent < 1) pass through.
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// cos, sin: [seq, rot_dim / 2] for positions 0..seq-1, angle = pos / base^(2i / rot_dim),
/// computed in float32 the way Megatron's RotaryEmbedding does.
template <typename T>
void rope_tables(T* cos, T* sin, int seq, int rot_dim, double base);

/// Rotates, in place, the heads of x viewed as [seq, batch, groups, heads_per_group, head_dim]
/// where a (seq, batch) row starts every row_stride elements, a group every group_stride and a
/// head every head_dim. inverse = rotate by -angle, which is the backward of the forward.
template <typename T>
void rope_apply(T* x, const T* cos, const T* sin, int seq, int batch, int groups,
                int heads_per_group, int head_dim, int rot_dim, std::int64_t row_stride,
                std::int64_t group_stride, bool inverse);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void rope_tables(tensor::tensor_view cos, tensor::tensor_view sin, int seq, int rot_dim,
                 double base);
void rope_apply(tensor::tensor_view x, tensor::const_tensor_view cos, tensor::const_tensor_view sin,
                int seq, int batch, int groups, int heads_per_group, int head_dim, int rot_dim,
                std::int64_t row_stride, std::int64_t group_stride, bool inverse);

}  // namespace mactor::kernels
