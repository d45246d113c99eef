// RoPE: one thread per rotated pair (row, group, head, i); pair i of a head is (i, i + rot_dim/2)
// or, interleaved, (2i, 2i + 1).
#include "kernels/cuda/rope.hpp"

#include <algorithm>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

struct rope_shape {
  int batch, groups, heads_per_group, head_dim, half;
  long long row_stride, group_stride;
  int step, partner;  // pair i is (head[i * step], head[i * step + partner])
};

__global__ void rope_apply_kernel(float* x, const float* cos, const float* sin, rope_shape r, long long pairs,
                                  float sign) {
  for (long long e = detail::first_element(); e < pairs; e += detail::grid_stride()) {
    const int i = int(e % r.half);
    long long rest = e / r.half;
    const int h = int(rest % r.heads_per_group);
    rest /= r.heads_per_group;
    const int g = int(rest % r.groups);
    const long long row = rest / r.groups;
    const long long s = row / r.batch;
    float* a = x + row * r.row_stride + g * r.group_stride + (long long)h * r.head_dim + i * r.step;
    const float c = cos[s * r.half + i], si = sign * sin[s * r.half + i];
    const float x1 = a[0], x2 = a[r.partner];
    a[0] = x1 * c - x2 * si;
    a[r.partner] = x2 * c + x1 * si;
  }
}

}  // namespace

void rope_apply(float* x, const float* cos, const float* sin, int seq, int batch, int groups, int heads_per_group,
                int head_dim, int rot_dim, std::int64_t row_stride, std::int64_t group_stride, bool interleaved,
                bool inverse, stream_handle s) {
  const int half = rot_dim / 2;
  const long long pairs = (long long)seq * batch * groups * heads_per_group * half;
  if (pairs == 0) return;
  const rope_shape shape{batch, groups, heads_per_group, head_dim, half, row_stride, group_stride,
                         interleaved ? 2 : 1, interleaved ? 1 : half};
  const int threads = detail::row_block;
  const int blocks = int(std::min<long long>(detail::blocks_for(pairs, threads), 1 << 20));
  rope_apply_kernel<<<blocks, threads, 0, s>>>(x, cos, sin, shape, pairs, inverse ? -1.f : 1.f);
  detail::check_launch("rope_apply");
}

}  // namespace mactor::kernels::cuda
