// LayerNorm forward/backward: one block per row for y and dx (two passes over the row for the
// variance, as the CPU kernel); dgamma and dbeta by column_sum.cuh.
#include "kernels/cuda/layernorm.hpp"

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/column_sum.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void layernorm_forward_kernel(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                         const float* beta, int h, float eps, float shift) {
  const long long row = blockIdx.x;
  const float* xi = x + row * h;
  float sum = 0;
  for (int j = threadIdx.x; j < h; j += blockDim.x) sum += xi[j];
  const float mu = detail::block_reduce(sum, detail::sum_op{}) / h;
  float var = 0;
  for (int j = threadIdx.x; j < h; j += blockDim.x) var += (xi[j] - mu) * (xi[j] - mu);
  const float r = rsqrtf(detail::block_reduce(var, detail::sum_op{}) / h + eps);
  if (threadIdx.x == 0) mean[row] = mu, rstd[row] = r;
  float* yi = y + row * h;
  for (int j = threadIdx.x; j < h; j += blockDim.x) {
    const float v = (xi[j] - mu) * r * (gamma[j] + shift);
    yi[j] = beta ? v + beta[j] : v;
  }
}

__global__ void layernorm_backward_dx_kernel(float* dx, const float* dy, const float* x, const float* gamma,
                                             const float* mean, const float* rstd, int h, float shift,
                                             bool accumulate) {
  const long long row = blockIdx.x;
  const float* xi = x + row * h;
  const float* gi = dy + row * h;
  const float m = mean[row], r = rstd[row];
  float sum_g = 0, sum_gx = 0;
  for (int j = threadIdx.x; j < h; j += blockDim.x) {
    const float g = gi[j] * (gamma[j] + shift);
    sum_g += g;
    sum_gx += g * (xi[j] - m) * r;
  }
  const float mean_g = detail::block_reduce(sum_g, detail::sum_op{}) / h;
  const float mean_gx = detail::block_reduce(sum_gx, detail::sum_op{}) / h;
  float* dxi = dx + row * h;
  for (int j = threadIdx.x; j < h; j += blockDim.x) {
    const float xhat = (xi[j] - m) * r;
    const float v = r * (gi[j] * (gamma[j] + shift) - mean_g - xhat * mean_gx);
    dxi[j] = accumulate ? dxi[j] + v : v;
  }
}

struct layernorm_dgamma_term {
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  __device__ float operator()(long long row, int j, int h) const {
    return dy[row * h + j] * (x[row * h + j] - mean[row]) * rstd[row];
  }
};

}  // namespace

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                       int n, int h, float eps, bool zero_centered_gamma, stream_handle s) {
  if (n == 0) return;
  layernorm_forward_kernel<<<n, detail::row_block, 0, s>>>(y, mean, rstd, x, gamma, beta, h, eps,
                                                           zero_centered_gamma ? 1.f : 0.f);
  detail::check_launch("layernorm_forward");
}

void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int n, int h,
                        bool zero_centered_gamma, bool accumulate_dx, stream_handle s) {
  if (n == 0) return;
  if (dx) {
    layernorm_backward_dx_kernel<<<n, detail::row_block, 0, s>>>(dx, dy, x, gamma, mean, rstd, h,
                                                                 zero_centered_gamma ? 1.f : 0.f, accumulate_dx);
    detail::check_launch("layernorm_backward (dx)");
  }
  if (dgamma) detail::add_column_sums(dgamma, layernorm_dgamma_term{dy, x, mean, rstd}, n, h, s);
  if (dgamma && dbeta) detail::add_column_sums(dbeta, detail::matrix_elements{dy}, n, h, s);
  detail::check_launch("layernorm_backward (dgamma, dbeta)");
}

}  // namespace mactor::kernels::cuda
