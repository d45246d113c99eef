// Causal self-attention core (softmax(Q K^T * scale) V) with grouped-query attention, reading
// Megatron's fused QKV layout directly: each (seq, batch) row of qkv holds, per query group,
// that group's query heads, then its key head, then its value head.
// Two Megatron variants: a sliding window (--window-size (left, 0): query i sees keys
// i - left .. i) and a per-head sink logit s_h in the softmax's denominator (--softmax-type
// off-by-one with s_h = 0, learnable with the parameter softmax_offset):
//   p[i, j] = exp(x[i, j]) / (exp(s_h) + sum_k exp(x[i, k])).
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

struct attention_dims {
  int seq = 0;
  int batch = 0;
  int heads = 0;     // query heads held here (this tensor-parallel shard)
  int groups = 0;    // key/value heads held here; heads % groups == 0
  int head_dim = 0;  // kv_channels
  int head_offset = 0;  // global index of the first head here (dropout mask indices)
  int total_heads = 0;  // global number of query heads (dropout mask indices)
  int window = -1;      // sliding window: query i sees keys [i - window, i]; -1: every key <= i
  std::int64_t qkv_width() const {
    return std::int64_t(groups) * (heads / groups + 2) * head_dim;
  }
};

/// qkv: [seq, batch, groups, heads/groups + 2, head_dim]; out: [seq, batch, heads, head_dim];
/// probs: [batch, heads, seq, seq], the fp32 softmax before dropout (kept for the backward).
/// Attention dropout keeps element (b, global head, i, j) of stream dropout_stream.
/// sink: [heads] logits added to each softmax's denominator, or null (the plain softmax).
template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, const attention_dims& dims, T scale,
                       float dropout_p, std::uint64_t dropout_stream, const T* sink = nullptr);

/// dqkv (overwritten, same layout as qkv) from dout [seq, batch, heads, head_dim]; with a sink,
/// dsink[heads] += its gradient when dsink is not null.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs,
                        const attention_dims& dims, T scale, float dropout_p,
                        std::uint64_t dropout_stream, const T* sink = nullptr, T* dsink = nullptr);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
// sink and dsink may be empty views; dsink (the sink's gradient, accumulated) may be of fp32 for
// a 16-bit model.
void attention_forward(tensor::tensor_view out, tensor::tensor_view probs,
                       tensor::const_tensor_view qkv, const attention_dims& dims, double scale,
                       float dropout_p, std::uint64_t dropout_stream,
                       tensor::const_tensor_view sink = {});
void attention_backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                        tensor::const_tensor_view qkv, tensor::const_tensor_view probs,
                        const attention_dims& dims, double scale, float dropout_p,
                        std::uint64_t dropout_stream, tensor::const_tensor_view sink = {},
                        tensor::tensor_view dsink = {});

}  // namespace mactor::kernels
