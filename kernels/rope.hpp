// Rotary position embedding as Megatron-Core's RotaryEmbedding and apply_rotary_pos_emb compute
// it. The first rot_dim channels of each head rotate in pairs; channels past rot_dim
// (--rotary-percent < 1) pass through. Pair i turns by angle position * inv_freq[i] and is
//   halves (default):        (x[i], x[i + rot_dim / 2])
//   interleaved (RoFormer):  (x[2i], x[2i + 1])            (--rotary-interleaved)
// each rotated as (a, b) -> (a cos - b sin, b cos + a sin).
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// How the angles are made: inv_freq[i] = 1 / base^(2i / rot_dim), optionally rescaled as Llama
/// 3.1 does (--use-rope-scaling), and position = s / seq_len_interpolation_factor.
struct rope_frequencies {
  double base = 10000.0;                      // --rotary-base
  double seq_len_interpolation_factor = 1.0;  // --rotary-seq-len-interpolation-factor
  bool llama3_scaling = false;                // --use-rope-scaling
  double scaling_factor = 8.0;                // --rope-scaling-factor
  // Megatron's RotaryEmbedding._apply_scaling defaults (no flags set them).
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

/// inv_freq[rot_dim / 2] in float32, as Megatron computes it (Llama 3.1 scaling included):
/// wavelengths 2 pi / f above original_max / low_freq_factor are divided by the factor, those
/// below original_max / high_freq_factor kept, those between blended smoothly.
std::vector<float> rope_inverse_frequencies(int rot_dim, const rope_frequencies& f);

/// cos, sin: [seq, rot_dim / 2] for positions 0..seq-1 (divided by the interpolation factor),
/// angle = position * inv_freq[i], computed in float32 the way Megatron's RotaryEmbedding does.
template <typename T>
void rope_tables(T* cos, T* sin, int seq, int rot_dim, const rope_frequencies& f);

/// Rotates, in place, the heads of x viewed as [seq, batch, groups, heads_per_group, head_dim]
/// where a (seq, batch) row starts every row_stride elements, a group every group_stride and a
/// head every head_dim. inverse = rotate by -angle, which is the backward of the forward.
template <typename T>
void rope_apply(T* x, const T* cos, const T* sin, int seq, int batch, int groups,
                int heads_per_group, int head_dim, int rot_dim, std::int64_t row_stride,
                std::int64_t group_stride, bool interleaved, bool inverse);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void rope_tables(tensor::tensor_view cos, tensor::tensor_view sin, int seq, int rot_dim,
                 const rope_frequencies& f);
void rope_apply(tensor::tensor_view x, tensor::const_tensor_view cos, tensor::const_tensor_view sin,
                int seq, int batch, int groups, int heads_per_group, int head_dim, int rot_dim,
                std::int64_t row_stride, std::int64_t group_stride, bool interleaved, bool inverse);

}  // namespace mactor::kernels
