// Embedding lookup and its scatter-add backward, for one vocabulary shard [vocab_start, vocab_end)
// (vocab-parallel embedding: ids outside the shard give zero rows and receive no gradient).
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// out[n, hidden] = beta * out + table[ids[i] - vocab_start] (zero row when outside the shard).
/// table: [vocab_end - vocab_start, hidden]
template <typename T>
void embedding_forward(T* out, const T* table, const std::int32_t* ids, int n, int hidden,
                       int vocab_start, int vocab_end, T beta = T(0));

/// dtable[ids[i] - vocab_start] += dout[i] for ids inside the shard. dout: [n, hidden]
template <typename T>
void embedding_backward(T* dtable, const T* dout, const std::int32_t* ids, int n, int hidden,
                        int vocab_start, int vocab_end);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void embedding_forward(tensor::tensor_view out, tensor::const_tensor_view table,
                       const std::int32_t* ids, int n, int hidden, int vocab_start, int vocab_end,
                       double beta = 0);
void embedding_backward(tensor::tensor_view dtable, tensor::const_tensor_view dout,
                        const std::int32_t* ids, int n, int hidden, int vocab_start,
                        int vocab_end);

}  // namespace mactor::kernels
