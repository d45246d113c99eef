// Bias add (one thread per element) and its backward (column_sum.cuh's fixed-order column sums).
#include "kernels/cuda/bias.hpp"

#include <algorithm>

#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

constexpr int threads = 256;

int blocks_for(long long n) { return int(std::min<long long>(detail::blocks_for(n, threads), 65535LL * 16)); }

__global__ void bias_add_kernel(float* y, const float* bias, long long count, int w) {
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) y[e] += bias[e % w];
}

// dbias's term for element (row, j): dy itself.
struct dy_term {
  const float* dy;
  __device__ float operator()(long long row, int j, int w) const { return dy[row * w + j]; }
};

}  // namespace

void bias_add(float* y, const float* bias, int n, int w, stream_handle s) {
  const long long count = (long long)n * w;
  if (count <= 0) return;
  bias_add_kernel<<<blocks_for(count), threads, 0, s>>>(y, bias, count, w);
  detail::check_launch("bias_add");
}

void bias_backward(float* dbias, const float* dy, int n, int w, stream_handle s) {
  if (n <= 0 || w <= 0) return;
  detail::add_column_sums(dbias, dy_term{dy}, n, w, s);
  detail::check_launch("bias_backward");
}

}  // namespace mactor::kernels::cuda
