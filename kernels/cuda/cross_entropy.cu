// Cross-entropy's steps: the row reductions take one block per row, the rest are elementwise.
#include "kernels/cuda/cross_entropy.hpp"

#include "kernels/cuda/block_reduce.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void row_max_kernel(float* row_max, const float* logits, int v) {
  const float* row = logits + (long long)blockIdx.x * v;
  float m = detail::max_op::identity;
  for (int j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, row[j]);
  m = detail::block_reduce(m, detail::max_op{});
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

__global__ void shard_sums_kernel(float* sum_exp, float* target_logit, float* logits, const float* row_max,
                                  const std::int32_t* labels, int v, int vocab_start) {
  const long long i = blockIdx.x;
  float* row = logits + i * v;
  const int local = labels[i] - vocab_start;
  // Read the target before the row is overwritten with its exponentials.
  if (threadIdx.x == 0) target_logit[i] = local >= 0 && local < v ? row[local] : 0.f;
  __syncthreads();
  const float shift = row_max[i];
  float sum = 0;
  for (int j = threadIdx.x; j < v; j += blockDim.x) sum += (row[j] = expf(row[j] - shift));
  sum = detail::block_reduce(sum, detail::sum_op{});
  if (threadIdx.x == 0) sum_exp[i] = sum;
}

__global__ void loss_kernel(float* loss, const float* sum_exp, const float* row_max, const float* target_logit, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) loss[i] = logf(sum_exp[i]) + row_max[i] - target_logit[i];
}

__global__ void backward_kernel(float* exps, const float* sum_exp, const std::int32_t* labels,
                                const float* grad_scale, int v, int vocab_start) {
  const long long i = blockIdx.x;
  float* row = exps + i * v;
  const float g = grad_scale[i];
  const float scale = g / sum_exp[i];
  const int local = labels[i] - vocab_start;
  for (int j = threadIdx.x; j < v; j += blockDim.x) row[j] = row[j] * scale - (j == local ? g : 0.f);
}

}  // namespace

void cross_entropy_row_max(float* row_max, const float* logits, int n, int v, stream_handle s) {
  if (n == 0) return;
  row_max_kernel<<<n, detail::row_block, 0, s>>>(row_max, logits, v);
  detail::check_launch("cross_entropy_row_max");
}

void cross_entropy_shard_sums(float* sum_exp, float* target_logit, float* logits, const float* row_max,
                              const std::int32_t* labels, int n, int v, int vocab_start, stream_handle s) {
  if (n == 0) return;
  shard_sums_kernel<<<n, detail::row_block, 0, s>>>(sum_exp, target_logit, logits, row_max, labels, v, vocab_start);
  detail::check_launch("cross_entropy_shard_sums");
}

void cross_entropy_loss(float* loss, const float* sum_exp, const float* row_max, const float* target_logit, int n,
                        stream_handle s) {
  if (n == 0) return;
  loss_kernel<<<detail::blocks_for(n, detail::row_block), detail::row_block, 0, s>>>(loss, sum_exp, row_max,
                                                                                    target_logit, n);
  detail::check_launch("cross_entropy_loss");
}

void cross_entropy_backward(float* exps, const float* sum_exp, const std::int32_t* labels, const float* grad_scale,
                            int n, int v, int vocab_start, stream_handle s) {
  if (n == 0) return;
  backward_kernel<<<n, detail::row_block, 0, s>>>(exps, sum_exp, labels, grad_scale, v, vocab_start);
  detail::check_launch("cross_entropy_backward");
}

}  // namespace mactor::kernels::cuda
