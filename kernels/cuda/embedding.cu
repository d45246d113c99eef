// Embedding forward (a gather, one block per token) and backward (a scatter-add with atomics).
#include "kernels/cuda/embedding.hpp"

#include "kernels/cuda/block_reduce.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void embedding_forward_kernel(float* out, const float* table, const std::int32_t* ids, int hidden,
                                         int vocab_start, int vocab_end, float beta) {
  const long long i = blockIdx.x;
  const int id = ids[i];
  const bool inside = id >= vocab_start && id < vocab_end;
  const float* row = inside ? table + (long long)(id - vocab_start) * hidden : nullptr;
  float* o = out + i * hidden;
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    const float v = inside ? row[j] : 0.f;
    o[j] = beta == 0.f ? v : beta * o[j] + v;
  }
}

__global__ void embedding_backward_kernel(float* dtable, const float* dout, const std::int32_t* ids, int hidden,
                                          int vocab_start, int vocab_end) {
  const long long i = blockIdx.x;
  const int id = ids[i];
  if (id < vocab_start || id >= vocab_end) return;
  float* row = dtable + (long long)(id - vocab_start) * hidden;
  const float* g = dout + i * hidden;
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) atomicAdd(row + j, g[j]);
}

}  // namespace

void embedding_forward(float* out, const float* table, const std::int32_t* ids, int n, int hidden,
                       int vocab_start, int vocab_end, float beta, stream_handle s) {
  if (n == 0) return;
  embedding_forward_kernel<<<n, detail::row_block, 0, s>>>(out, table, ids, hidden, vocab_start, vocab_end, beta);
  detail::check_launch("embedding_forward");
}

void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, int n, int hidden,
                        int vocab_start, int vocab_end, stream_handle s) {
  if (n == 0) return;
  embedding_backward_kernel<<<n, detail::row_block, 0, s>>>(dtable, dout, ids, hidden, vocab_start, vocab_end);
  detail::check_launch("embedding_backward");
}

}  // namespace mactor::kernels::cuda
