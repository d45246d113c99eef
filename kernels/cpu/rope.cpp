// RoPE tables and in-place rotation.
#include "kernels/rope.hpp"
#include "kernels/cpu/typed.hpp"

#include <cmath>

namespace mactor::kernels {

template <typename T>
void rope_tables(T* cos, T* sin, int seq, int rot_dim, double base) {
  const int half = rot_dim / 2;
  for (int i = 0; i < half; ++i) {
    // inv_freq = 1 / base ** (arange(0, dim, 2) / dim) in float32, as Megatron computes it.
    const float exponent = float(2 * i) / float(rot_dim);
    const float inv_freq = 1.0f / std::pow(float(base), exponent);
    for (int s = 0; s < seq; ++s) {
      const float angle = float(s) * inv_freq;
      cos[std::int64_t(s) * half + i] = T(std::cos(angle));
      sin[std::int64_t(s) * half + i] = T(std::sin(angle));
    }
  }
}

template <typename T>
void rope_apply(T* x, const T* cos, const T* sin, int seq, int batch, int groups,
                int heads_per_group, int head_dim, int rot_dim, std::int64_t row_stride,
                std::int64_t group_stride, bool inverse) {
  const int half = rot_dim / 2;
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
          const T x1 = head[i], x2 = head[i + half];
          const T si = sign * sn[i];
          head[i] = x1 * c[i] - x2 * si;
          head[i + half] = x2 * c[i] + x1 * si;
        }
      }
    }
  }
}

template void rope_tables<float>(float*, float*, int, int, double);
template void rope_tables<double>(double*, double*, int, int, double);
template void rope_apply<float>(float*, const float*, const float*, int, int, int, int, int, int,
                                std::int64_t, std::int64_t, bool);
template void rope_apply<double>(double*, const double*, const double*, int, int, int, int, int,
                                 int, std::int64_t, std::int64_t, bool);


void rope_tables(tensor::tensor_view cos, tensor::tensor_view sin, int seq, int rot_dim,
                 double base) {
  check_compatible("rope_tables", {cos, sin});
  detail::need("rope_tables", "cos", cos, std::int64_t(seq) * rot_dim / 2);
  detail::need("rope_tables", "sin", sin, std::int64_t(seq) * rot_dim / 2);
  detail::fp32_stage stage;
  dispatch_compute("rope_tables", cos.type, cos.where, [&](auto zero) {
    using T = decltype(zero);
    rope_tables<T>(stage.typed<T>(cos), stage.typed<T>(sin), seq, rot_dim, base);
  });
}

void rope_apply(tensor::tensor_view x, tensor::const_tensor_view cos, tensor::const_tensor_view sin,
                int seq, int batch, int groups, int heads_per_group, int head_dim, int rot_dim,
                std::int64_t row_stride, std::int64_t group_stride, bool inverse) {
  check_compatible("rope_apply", {x, cos, sin});
  detail::need("rope_apply", "x", x, std::int64_t(seq) * batch * row_stride);
  detail::need("rope_apply", "cos", cos, std::int64_t(seq) * rot_dim / 2);
  detail::need("rope_apply", "sin", sin, std::int64_t(seq) * rot_dim / 2);
  detail::fp32_stage stage;
  dispatch_compute("rope_apply", x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    rope_apply<T>(stage.typed<T>(x), stage.typed<T>(cos), stage.typed<T>(sin), seq, batch,
                  groups, heads_per_group, head_dim, rot_dim, row_stride, group_stride, inverse);
  });
}

}  // namespace mactor::kernels
