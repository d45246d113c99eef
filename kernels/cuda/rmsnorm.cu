// RMSNorm forward/backward: one block per row for y and dx; dgamma by column_sum.cuh.
#include "kernels/cuda/rmsnorm.hpp"

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/column_sum.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void rmsnorm_forward_kernel(float* y, float* rstd, const float* x, const float* gamma, int h,
                                       float eps, float shift) {
  const long long row = blockIdx.x;
  const float* xi = x + row * h;
  float sq = 0;
  for (int j = threadIdx.x; j < h; j += blockDim.x) sq += xi[j] * xi[j];
  sq = detail::block_reduce(sq, detail::sum_op{});
  const float r = rsqrtf(sq / h + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  float* yi = y + row * h;
  for (int j = threadIdx.x; j < h; j += blockDim.x) yi[j] = xi[j] * r * (gamma[j] + shift);
}

__global__ void rmsnorm_backward_dx_kernel(float* dx, const float* dy, const float* x, const float* gamma,
                                           const float* rstd, int h, float shift, bool accumulate) {
  const long long row = blockIdx.x;
  const float* xi = x + row * h;
  const float* gi = dy + row * h;
  const float r = rstd[row];
  float sum_gx = 0;
  for (int j = threadIdx.x; j < h; j += blockDim.x) sum_gx += gi[j] * (gamma[j] + shift) * xi[j] * r;
  const float mean_gx = detail::block_reduce(sum_gx, detail::sum_op{}) / h;
  float* dxi = dx + row * h;
  for (int j = threadIdx.x; j < h; j += blockDim.x) {
    const float v = r * (gi[j] * (gamma[j] + shift) - xi[j] * r * mean_gx);
    dxi[j] = accumulate ? dxi[j] + v : v;
  }
}

// dgamma's term for element (row, j): dy * xhat.
struct rmsnorm_dgamma_term {
  const float* dy;
  const float* x;
  const float* rstd;
  __device__ float operator()(long long row, int j, int h) const {
    return dy[row * h + j] * x[row * h + j] * rstd[row];
  }
};

}  // namespace

void rmsnorm_forward(float* y, float* rstd, const float* x, const float* gamma, int n, int h, float eps,
                     bool zero_centered_gamma, stream_handle s) {
  if (n == 0) return;
  rmsnorm_forward_kernel<<<n, detail::row_block, 0, s>>>(y, rstd, x, gamma, h, eps, zero_centered_gamma ? 1.f : 0.f);
  detail::check_launch("rmsnorm_forward");
}

void rmsnorm_backward(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                      const float* rstd, int n, int h, bool zero_centered_gamma, bool accumulate_dx,
                      stream_handle s) {
  if (n == 0) return;
  if (dx) {
    rmsnorm_backward_dx_kernel<<<n, detail::row_block, 0, s>>>(dx, dy, x, gamma, rstd, h,
                                                               zero_centered_gamma ? 1.f : 0.f, accumulate_dx);
    detail::check_launch("rmsnorm_backward (dx)");
  }
  if (dgamma) {
    detail::add_column_sums(dgamma, rmsnorm_dgamma_term{dy, x, rstd}, n, h, s);
    detail::check_launch("rmsnorm_backward (dgamma)");
  }
}

}  // namespace mactor::kernels::cuda
