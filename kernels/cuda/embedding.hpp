// Embedding lookup and its backward on a CUDA device: kernels/embedding.hpp's contract, fp32,
// ids and tensors in device memory, queued on stream s.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// out[n, hidden] = beta * out + table[ids[i] - vocab_start] (zero row when outside the shard;
/// out is not read when beta is 0).
void embedding_forward(float* out, const float* table, const std::int32_t* ids, int n, int hidden,
                       int vocab_start, int vocab_end, float beta = 0, stream_handle s = nullptr);

/// dtable[ids[i] - vocab_start] += dout[i] for ids inside the shard. Rows of a repeated id are
/// added with atomics, so their float sum's rounding depends on the order the rows ran in.
void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, int n, int hidden,
                        int vocab_start, int vocab_end, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
