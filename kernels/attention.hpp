// Causal self-attention core (softmax(Q K^T * scale) V) with grouped-query attention, reading
// Megatron's fused QKV layout directly: each (seq, batch) row of qkv holds, per query group,
// that group's query heads, then its key head, then its value head.
// A document mask keeps each query to the keys of its own document (Megatron's
// --reset-attention-mask). Two Megatron variants: a sliding window (--window-size (left, 0): query i sees keys
// i - left .. i) and a per-head sink logit s_h in the softmax's denominator (--softmax-type
// off-by-one with s_h = 0, learnable with the parameter softmax_offset):
//   p[i, j] = exp(x[i, j]) / (exp(s_h) + sum_k exp(x[i, k])).
// Context parallelism: the query rows held here are runs of the sequence (Megatron's
// load-balanced chunks), each with its global positions; keys and values come from a separate
// buffer of the whole sequence (kv_seq rows, the context-parallel group's all-gather), and the
// backward accumulates their gradients into a buffer of the same shape.
#pragma once
#include <array>
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// Rows [local, local + length) of the queries here are positions [global, global + length).
struct query_run {
  int local = 0;
  int global = 0;
  int length = 0;
};

struct attention_dims {
  int seq = 0;       // query rows here (the whole sequence without context parallelism)
  int batch = 0;
  int heads = 0;     // query heads held here (this tensor-parallel shard)
  int groups = 0;    // key/value heads held here; heads % groups == 0
  int head_dim = 0;  // kv_channels
  int head_offset = 0;  // global index of the first head here (dropout mask indices)
  int total_heads = 0;  // global number of query heads (dropout mask indices)
  int window = -1;      // sliding window: query i sees keys [i - window, i]; -1: every key <= i
  /// Document mask (--reset-attention-mask): [batch, keys], the first key position the query at
  /// each position sees (non-decreasing along a sequence, at most the position); null: 0.
  const std::int32_t* document_start = nullptr;
  int kv_seq = 0;       // key rows (the whole sequence); 0: seq
  std::array<query_run, 2> runs{};  // the query rows' positions; num_runs = 0: rows 0..seq
  int num_runs = 0;
  int keys() const { return kv_seq > 0 ? kv_seq : seq; }
  std::int64_t qkv_width() const {
    return std::int64_t(groups) * (heads / groups + 2) * head_dim;
  }
};

/// qkv: [seq, batch, groups, heads/groups + 2, head_dim]; out: [seq, batch, heads, head_dim];
/// probs: [batch, heads, seq, keys], the fp32 softmax before dropout (kept for the backward).
/// Attention dropout keeps element (b, global head, i, j) of stream dropout_stream, i and j
/// global positions (the same masks with and without context parallelism).
/// sink: [heads] logits added to each softmax's denominator, or null (the plain softmax).
/// kv: [keys, batch, qkv width], the keys and values (null: qkv's own).
template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, const attention_dims& dims, T scale,
                       float dropout_p, std::uint64_t dropout_stream, const T* sink = nullptr,
                       const T* kv = nullptr);

/// dqkv's query parts (overwritten, same layout as qkv) from dout [seq, batch, heads, head_dim],
/// and the key and value parts of dkv (overwritten; [keys, batch, qkv width], null: dqkv); with
/// a sink, dsink[heads] += its gradient when dsink is not null.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs,
                        const attention_dims& dims, T scale, float dropout_p,
                        std::uint64_t dropout_stream, const T* sink = nullptr, T* dsink = nullptr,
                        const T* kv = nullptr, T* dkv = nullptr);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
// sink and dsink may be empty views; dsink (the sink's gradient, accumulated) may be of fp32 for
// a 16-bit model. kv and dkv: empty views without context parallelism.
void attention_forward(tensor::tensor_view out, tensor::tensor_view probs,
                       tensor::const_tensor_view qkv, const attention_dims& dims, double scale,
                       float dropout_p, std::uint64_t dropout_stream,
                       tensor::const_tensor_view sink = {}, tensor::const_tensor_view kv = {});
void attention_backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                        tensor::const_tensor_view qkv, tensor::const_tensor_view probs,
                        const attention_dims& dims, double scale, float dropout_p,
                        std::uint64_t dropout_stream, tensor::const_tensor_view sink = {},
                        tensor::tensor_view dsink = {}, tensor::const_tensor_view kv = {},
                        tensor::tensor_view dkv = {});

}  // namespace mactor::kernels
