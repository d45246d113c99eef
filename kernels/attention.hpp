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
#include <cstdint>

#include "kernels/attention_dims.hpp"
#include "tensor/tensor.hpp"

namespace mactor::kernels {

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
