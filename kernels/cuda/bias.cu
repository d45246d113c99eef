// Bias add (one thread per element) and its backward (column_sum.cuh's fixed-order column sums).
#include "kernels/cuda/bias.hpp"

#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void bias_add_kernel(float* y, const float* bias, long long count, int w) {
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) y[e] += bias[e % w];
}

}  // namespace

void bias_add(float* y, const float* bias, int n, int w, stream_handle s) {
  const long long count = (long long)n * w;
  if (count <= 0) return;
  bias_add_kernel<<<detail::grid_blocks(count), detail::grid_threads, 0, s>>>(y, bias, count, w);
  detail::check_launch("bias_add");
}

void bias_backward(float* dbias, const float* dy, int n, int w, stream_handle s) {
  if (n <= 0 || w <= 0) return;
  detail::add_column_sums(dbias, detail::matrix_elements{dy}, n, w, s);
  detail::check_launch("bias_backward");
}

}  // namespace mactor::kernels::cuda
