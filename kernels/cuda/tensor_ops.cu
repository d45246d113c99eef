// Scale and add: one thread per element (grid-stride loops).
#include "kernels/cuda/tensor_ops.hpp"

#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void scale_kernel(float* x, long long n, float factor) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) x[e] *= factor;
}

__global__ void add_kernel(float* dst, const float* src, long long n) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) dst[e] += src[e];
}

}  // namespace

void scale(float* x, std::int64_t n, float factor, stream_handle s) {
  if (n <= 0) return;
  scale_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(x, n, factor);
  detail::check_launch("scale");
}

void add(float* dst, const float* src, std::int64_t n, stream_handle s) {
  if (n <= 0) return;
  add_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(dst, src, n);
  detail::check_launch("add");
}

}  // namespace mactor::kernels::cuda
