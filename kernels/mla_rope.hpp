// Multi-latent attention's rotary embedding as Megatron-Core applies it (rope_utils with
// multi_latent_attention set): the first rot_dim channels of a vector are read as pairs
// (x[2i], x[2i + 1]), each turned by angle position * inv_freq[i], and written de-interleaved:
//   y[i] = x[2i] cos - x[2i + 1] sin,   y[i + rot_dim / 2] = x[2i + 1] cos + x[2i] sin,
// cos and sin scaled by a factor (YaRN's concentration factor, 1 for plain RoPE); channels past
// rot_dim pass through. The frequencies are plain RoPE's (kernels/rope.hpp) or YaRN's
// (Megatron's YarnRotaryEmbedding): inv_freq = inter * ramp + extra * (1 - ramp) with
// extra = 1 / base^(2i / dim), inter = extra / scaling_factor and ramp the linear ramp between
// the correction dims of beta_fast and beta_slow rotations over original_max_position_embeddings.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

struct yarn_settings {
  double scaling_factor = 1.0;                  // --rotary-scaling-factor
  double original_max_position_embeddings = 4096;  // MLATransformerConfig's default (no flag)
  double beta_fast = 32, beta_slow = 1;            // likewise
  double mscale = 1.0;                          // --mscale
  double mscale_all_dim = 0.0;                  // --mscale-all-dim
};

/// YaRN's m(scale, mscale) = 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1.
double yarn_mscale(double scale, double mscale);
/// The factor on cos and sin: m(factor, mscale) / m(factor, mscale_all_dim).
double yarn_concentration(const yarn_settings& y);
/// inv_freq[dim / 2] in float32 as Megatron computes it.
std::vector<float> yarn_inverse_frequencies(int dim, double base, const yarn_settings& y);

/// cos, sin: [seq, inv_freq.size()] = cos(s * inv_freq[i]) * factor (and sin), computed in
/// float32 and stored in the tensors' dtype, for positions s = 0..seq-1.
void mla_rope_tables(tensor::tensor_view cos, tensor::tensor_view sin, int seq,
                     const std::vector<float>& inv_freq, double factor);

/// Rotates in place the vectors of x viewed as [seq, batch, heads]: vector (s, b, h) starts at
/// (s * batch + b) * row_stride + h * head_stride + offset and rotates with row s of the tables
/// ([seq, rot_dim / 2]). inverse applies the transpose (the backward of the forward).
void mla_rope_apply(tensor::tensor_view x, tensor::const_tensor_view cos,
                    tensor::const_tensor_view sin, int seq, int batch, int heads,
                    std::int64_t row_stride, std::int64_t head_stride, std::int64_t offset,
                    int rot_dim, bool inverse);

}  // namespace mactor::kernels
