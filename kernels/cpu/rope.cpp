// RoPE frequencies, tables and in-place rotation.
#include "kernels/rope.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <cmath>
#include <numbers>

namespace mactor::kernels {

namespace {

// Megatron's _apply_scaling for one frequency, in float32 and in its order of operations.
float llama3_scaled(float f, const rope_frequencies& r) {
  const float factor = float(r.scaling_factor);
  const float low_freq_wavelen = float(r.original_max_position_embeddings / r.low_freq_factor);
  const float high_freq_wavelen = float(r.original_max_position_embeddings / r.high_freq_factor);
  const float wavelen = float(2 * std::numbers::pi) / f;
  const float kept = wavelen > low_freq_wavelen ? f / factor : f;
  const float smooth = (float(r.original_max_position_embeddings) / wavelen - float(r.low_freq_factor)) /
                       float(r.high_freq_factor - r.low_freq_factor);
  const float smoothed = (1 - smooth) * kept / factor + smooth * kept;
  const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
  return medium ? smoothed : kept;
}

}  // namespace

std::vector<float> rope_inverse_frequencies(int rot_dim, const rope_frequencies& r) {
  std::vector<float> inv_freq(std::size_t(rot_dim / 2));
  for (int i = 0; i < rot_dim / 2; ++i) {
    // inv_freq = 1 / base ** (arange(0, dim, 2) / dim) in float32, as Megatron computes it.
    const float exponent = float(2 * i) / float(rot_dim);
    inv_freq[std::size_t(i)] = 1.0f / std::pow(float(r.base), exponent);
    if (r.llama3_scaling) inv_freq[std::size_t(i)] = llama3_scaled(inv_freq[std::size_t(i)], r);
  }
  return inv_freq;
}

template <typename T>
void rope_tables(T* cos, T* sin, int seq, int rot_dim, const rope_frequencies& r) {
  const int half = rot_dim / 2;
  const auto inv_freq = rope_inverse_frequencies(rot_dim, r);
  // Megatron: seq *= 1 / seq_len_interpolation_factor on a float32 arange.
  const float position_scale = float(1.0 / r.seq_len_interpolation_factor);
  for (int s = 0; s < seq; ++s) {
    const float position = float(s) * position_scale;
    for (int i = 0; i < half; ++i) {
      const float angle = position * inv_freq[std::size_t(i)];
      cos[std::int64_t(s) * half + i] = T(std::cos(angle));
      sin[std::int64_t(s) * half + i] = T(std::sin(angle));
    }
  }
}

template <typename T>
void rope_apply(T* x, const T* cos, const T* sin, int seq, int batch, int groups,
                int heads_per_group, int head_dim, int rot_dim, std::int64_t row_stride,
                std::int64_t group_stride, bool interleaved, bool inverse) {
  const int half = rot_dim / 2;
  // Pair i is (first[i * step], first[i * step + partner]).
  const int step = interleaved ? 2 : 1, partner = interleaved ? 1 : half;
  const T sign = inverse ? T(-1) : T(1);
  const int rows = seq * batch;
#pragma omp parallel for schedule(static) if (std::int64_t(rows) * groups * heads_per_group * head_dim > 16384)
  for (int r = 0; r < rows; ++r) {
    const int s = r / batch;
    const T* c = cos + std::int64_t(s) * half;
    const T* sn = sin + std::int64_t(s) * half;
    for (int g = 0; g < groups; ++g) {
      for (int h = 0; h < heads_per_group; ++h) {
        T* head = x + r * row_stride + g * group_stride + std::int64_t(h) * head_dim;
        for (int i = 0; i < half; ++i) {
          T* a = head + i * step;
          const T x1 = a[0], x2 = a[partner];
          const T si = sign * sn[i];
          a[0] = x1 * c[i] - x2 * si;
          a[partner] = x2 * c[i] + x1 * si;
        }
      }
    }
  }
}

template void rope_tables<float>(float*, float*, int, int, const rope_frequencies&);
template void rope_tables<double>(double*, double*, int, int, const rope_frequencies&);
template void rope_apply<float>(float*, const float*, const float*, int, int, int, int, int, int,
                                std::int64_t, std::int64_t, bool, bool);
template void rope_apply<double>(double*, const double*, const double*, int, int, int, int, int,
                                 int, std::int64_t, std::int64_t, bool, bool);


void rope_tables(tensor::tensor_view cos, tensor::tensor_view sin, int seq, int rot_dim,
                 const rope_frequencies& f) {
  check_compatible("rope_tables", {cos, sin});
  detail::need("rope_tables", "cos", cos, std::int64_t(seq) * rot_dim / 2);
  detail::need("rope_tables", "sin", sin, std::int64_t(seq) * rot_dim / 2);
  detail::fp32_stage stage;
  dispatch_compute("rope_tables", cos.type, cos.where, [&](auto zero) {
    using T = decltype(zero);
    rope_tables<T>(stage.typed<T>(cos), stage.typed<T>(sin), seq, rot_dim, f);
  });
}

void rope_apply(tensor::tensor_view x, tensor::const_tensor_view cos, tensor::const_tensor_view sin,
                int seq, int batch, int groups, int heads_per_group, int head_dim, int rot_dim,
                std::int64_t row_stride, std::int64_t group_stride, bool interleaved, bool inverse) {
  check_compatible("rope_apply", {x, cos, sin});
  detail::need("rope_apply", "x", x, std::int64_t(seq) * batch * row_stride);
  detail::need("rope_apply", "cos", cos, std::int64_t(seq) * rot_dim / 2);
  detail::need("rope_apply", "sin", sin, std::int64_t(seq) * rot_dim / 2);
  if (on_device(x))
    return device_kernels_for("rope_apply", x).rope_apply(x, cos, sin, seq, batch, groups,
        heads_per_group, head_dim, rot_dim, row_stride, group_stride, interleaved, inverse);
  detail::fp32_stage stage;
  dispatch_compute("rope_apply", x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    rope_apply<T>(stage.typed<T>(x), stage.typed<T>(cos), stage.typed<T>(sin), seq, batch,
                  groups, heads_per_group, head_dim, rot_dim, row_stride, group_stride, interleaved,
                  inverse);
  });
}

}  // namespace mactor::kernels
