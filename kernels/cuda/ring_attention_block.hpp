// Ring attention's block step on a CUDA device: kernels/ring_attention_block.hpp's contract in
// fp32, pointers into device memory, queued on stream s. A flash-attention-style exact path: one
// thread block per (query row, head) folds the block's keys into the online softmax 128 keys at
// a time (forward) or recomputes the probabilities from the log-sum-exp (the queries' gradient);
// one thread block per (key row, group) sums the keys' and values' gradients over the query rows
// and heads that see the key, so no atomics are needed and a backward gives the same bits every
// time. Nothing of size rows x keys is kept.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"
#include "kernels/ring_block_dims.hpp"

namespace mactor::kernels::cuda {

void ring_block_forward(float* m, float* l, float* o, const float* qkv, const float* block, const ring_block_dims& r,
                        float scale, float dropout_p, std::uint64_t dropout_stream, stream_handle s = nullptr);

void ring_block_backward(float* dq, float* dblock, const float* dout, const float* qkv, const float* block,
                         const float* lse, const float* delta, const ring_block_dims& r, float scale, float dropout_p,
                         std::uint64_t dropout_stream, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
