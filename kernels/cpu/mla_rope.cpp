// MLA's rotary embedding: YaRN frequencies, tables and the de-interleaving rotation.
#include "kernels/mla_rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

namespace mactor::kernels {
namespace {

// The dimension whose wavelength makes num_rotations turns over max_position positions.
double correction_dim(double num_rotations, int dim, double base, double max_position) {
  return dim * std::log(max_position / (num_rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

template <typename T>
void rotate(T* x, const T* cos, const T* sin, int seq, int batch, int heads, std::int64_t row_stride,
            std::int64_t head_stride, std::int64_t offset, int rot_dim, bool inverse) {
  const int half = rot_dim / 2;
  std::vector<T> tmp(static_cast<std::size_t>(rot_dim));
  for (int s = 0; s < seq; ++s)
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < heads; ++h) {
        T* v = x + (std::int64_t(s) * batch + b) * row_stride + h * head_stride + offset;
        const T* c = cos + std::int64_t(s) * half;
        const T* n = sin + std::int64_t(s) * half;
        for (int i = 0; i < half; ++i) {
          if (!inverse) {  // pairs (2i, 2i + 1) in, halves (i, i + half) out
            tmp[i] = v[2 * i] * c[i] - v[2 * i + 1] * n[i];
            tmp[i + half] = v[2 * i + 1] * c[i] + v[2 * i] * n[i];
          } else {  // the transpose: halves in, pairs out
            tmp[2 * i] = v[i] * c[i] + v[i + half] * n[i];
            tmp[2 * i + 1] = v[i + half] * c[i] - v[i] * n[i];
          }
        }
        std::copy(tmp.begin(), tmp.end(), v);
      }
}

}  // namespace

double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

double yarn_concentration(const yarn_settings& y) {
  return yarn_mscale(y.scaling_factor, y.mscale) / yarn_mscale(y.scaling_factor, y.mscale_all_dim);
}

std::vector<float> yarn_inverse_frequencies(int dim, double base, const yarn_settings& y) {
  double low = std::floor(correction_dim(y.beta_fast, dim, base, y.original_max_position_embeddings));
  double high = std::ceil(correction_dim(y.beta_slow, dim, base, y.original_max_position_embeddings));
  low = std::max(low, 0.0), high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;
  std::vector<float> inv_freq(std::size_t(dim / 2));
  for (int i = 0; i < dim / 2; ++i) {
    const float extra = 1.0f / std::pow(float(base), float(2 * i) / float(dim));
    const float inter = 1.0f / (float(y.scaling_factor) * std::pow(float(base), float(2 * i) / float(dim)));
    const float ramp = std::clamp(float((i - low) / (high - low)), 0.0f, 1.0f);
    const float extra_weight = 1.0f - ramp;  // Megatron's inv_freq_mask
    inv_freq[std::size_t(i)] = inter * (1 - extra_weight) + extra * extra_weight;
  }
  return inv_freq;
}

void mla_rope_tables(tensor::tensor_view cos, tensor::tensor_view sin, int seq,
                     const std::vector<float>& inv_freq, double factor) {
  const std::int64_t half = std::int64_t(inv_freq.size());
  check_compatible("mla_rope_tables", {cos, sin});
  detail::need("mla_rope_tables", "cos", cos, seq * half);
  detail::need("mla_rope_tables", "sin", sin, seq * half);
  detail::fp32_stage stage;
  dispatch_compute("mla_rope_tables", cos.type, cos.where, [&](auto zero) {
    using T = decltype(zero);
    T* c = stage.output<T>(cos, seq * half);
    T* s = stage.output<T>(sin, seq * half);
    for (int p = 0; p < seq; ++p)
      for (std::int64_t i = 0; i < half; ++i) {
        const float angle = float(p) * inv_freq[std::size_t(i)];
        c[p * half + i] = T(std::cos(angle) * float(factor));
        s[p * half + i] = T(std::sin(angle) * float(factor));
      }
  });
}

void mla_rope_apply(tensor::tensor_view x, tensor::const_tensor_view cos,
                    tensor::const_tensor_view sin, int seq, int batch, int heads,
                    std::int64_t row_stride, std::int64_t head_stride, std::int64_t offset,
                    int rot_dim, bool inverse) {
  check_compatible("mla_rope_apply", {x, cos, sin});
  detail::need("mla_rope_apply", "x", x, std::int64_t(seq) * batch * row_stride);
  detail::need("mla_rope_apply", "cos", cos, std::int64_t(seq) * rot_dim / 2);
  detail::need("mla_rope_apply", "sin", sin, std::int64_t(seq) * rot_dim / 2);
  if (on_device(x))
    return device_kernels_for("mla_rope_apply", x)
        .mla_rope_apply(x, cos, sin, seq, batch, heads, row_stride, head_stride, offset, rot_dim, inverse);
  detail::fp32_stage stage;
  dispatch_compute("mla_rope_apply", x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    rotate<T>(stage.typed<T>(x), stage.typed<T>(cos), stage.typed<T>(sin), seq, batch, heads,
              row_stride, head_stride, offset, rot_dim, inverse);
  });
}

}  // namespace mactor::kernels
