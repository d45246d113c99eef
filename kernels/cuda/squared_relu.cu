// Squared ReLU: one thread per element (grid-stride loops); the weighted backward one block per
// row for its row sums.
#include "kernels/cuda/squared_relu.hpp"

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void squared_relu_forward_kernel(float* y, const float* x, long long n) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) {
    const float r = fmaxf(x[e], 0.0f);
    y[e] = r * r;
  }
}

__global__ void squared_relu_backward_kernel(float* dx, const float* dy, const float* x, long long n) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride())
    dx[e] = dy[e] * 2.0f * fmaxf(x[e], 0.0f);
}

__global__ void weighted_forward_kernel(float* y, const float* x, const float* w, long long n, int width) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) {
    const float r = fmaxf(x[e], 0.0f);
    y[e] = r * r * w[e / width];
  }
}

// One block per row: dx element-wise, dw the block's sum.
__global__ void weighted_backward_kernel(float* dx, float* dw, const float* dy, const float* x, const float* w,
                                         int width) {
  const long long row = blockIdx.x;
  const float* dyr = dy + row * width;
  const float* xr = x + row * width;
  float* dxr = dx + row * width;
  const float wr = w[row];
  float sum = 0.0f;
  for (int j = threadIdx.x; j < width; j += blockDim.x) {
    const float r = fmaxf(xr[j], 0.0f);
    sum += r * r * dyr[j];
    dxr[j] = dyr[j] * wr * 2.0f * r;
  }
  sum = detail::block_reduce(sum, detail::sum_op{});
  if (threadIdx.x == 0) dw[row] = sum;
}

}  // namespace

void squared_relu_forward(float* y, const float* x, std::int64_t n, stream_handle s) {
  if (n <= 0) return;
  squared_relu_forward_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(y, x, n);
  detail::check_launch("squared_relu_forward");
}

void squared_relu_backward(float* dx, const float* dy, const float* x, std::int64_t n, stream_handle s) {
  if (n <= 0) return;
  squared_relu_backward_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(dx, dy, x, n);
  detail::check_launch("squared_relu_backward");
}

void weighted_squared_relu_forward(float* y, const float* x, const float* w, std::int64_t rows, int width,
                                   stream_handle s) {
  const long long n = (long long)rows * width;
  if (n <= 0) return;
  weighted_forward_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(y, x, w, n, width);
  detail::check_launch("weighted_squared_relu_forward");
}

void weighted_squared_relu_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                                    std::int64_t rows, int width, stream_handle s) {
  if (rows <= 0) return;
  // Grid x allows 2^31 - 1 blocks: any row count a layer has.
  weighted_backward_kernel<<<unsigned(rows), detail::row_block, 0, s>>>(dx, dw, dy, x, w, width);
  detail::check_launch("weighted_squared_relu_backward");
}

}  // namespace mactor::kernels::cuda
