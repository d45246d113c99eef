// Dropout and bias-dropout-add: one thread per element (grid-stride loops). The products and sums
// are written with the _rn intrinsics so that nvcc does not contract them into an FMA: the CPU
// kernels round x + bias, then the scaled value, then the sum, one at a time.
#include "kernels/cuda/dropout.hpp"

#include "kernels/cuda/grid_stride.cuh"
#include "kernels/dropout_hash.hpp"

namespace mactor::kernels::cuda {

namespace {

__device__ float dropped(float v, float p, float scale, std::uint64_t stream, std::uint64_t index) {
  return dropout_uniform(stream, index) >= p ? __fmul_rn(v, scale) : 0.0f;
}

__global__ void dropout_kernel(float* y, const float* x, long long n, float p, float scale, std::uint64_t stream,
                               std::uint64_t first) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride())
    y[e] = p > 0.0f ? dropped(x[e], p, scale, stream, first + std::uint64_t(e)) : x[e];
}

__global__ void bias_dropout_add_kernel(float* out, const float* residual, const float* x, const float* bias,
                                        long long n, int w, float p, float scale, std::uint64_t stream,
                                        std::uint64_t first) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) {
    const float v = __fadd_rn(x[e], bias ? bias[e % w] : 0.0f);
    out[e] = __fadd_rn(residual[e], p > 0.0f ? dropped(v, p, scale, stream, first + std::uint64_t(e)) : v);
  }
}

}  // namespace

void dropout_apply(float* y, const float* x, std::int64_t n, float p, std::uint64_t stream,
                   std::uint64_t first_index, stream_handle s) {
  if (n <= 0) return;
  dropout_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(y, x, n, p, 1.0f / (1.0f - p), stream, first_index);
  detail::check_launch("dropout_apply");
}

void bias_dropout_add(float* out, const float* residual, const float* x, const float* bias, int n, int w,
                      float p, std::uint64_t stream, std::uint64_t first_index, stream_handle s) {
  const long long count = (long long)n * w;
  if (count <= 0) return;
  bias_dropout_add_kernel<<<detail::grid_blocks(count), detail::grid_threads, 0, s>>>(out, residual, x, bias, count, w, p,
                                                               1.0f / (1.0f - p), stream, first_index);
  detail::check_launch("bias_dropout_add");
}

}  // namespace mactor::kernels::cuda
