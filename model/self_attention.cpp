// Self-attention block: qkv projection, rope, attention core, output projection.
#include "model/self_attention.hpp"

#include <cmath>

#include "kernels/rope.hpp"
#include "model/activation.hpp"

namespace mactor::model {

self_attention::self_attention(parameter_store& store, const std::string& name,
                               const gpt_model_config& c, int tp_rank, int tp_size)
    : linear_qkv_(store, name + ".linear_qkv", c.hidden_size,
                  c.query_groups() * (c.num_attention_heads / c.query_groups() + 2) * c.head_dim(),
                  c.add_bias_linear || c.add_qkv_bias, tp_split::rows, c.init_method_std,
                  tp_size, c.sequence_parallel, c.fp8),
      linear_proj_(store, name + ".linear_proj", c.num_attention_heads * c.head_dim(),
                   c.hidden_size, c.add_bias_linear,
                   c.init_method_std / std::sqrt(2.0 * c.num_layers), tp_size,
                   c.sequence_parallel, c.fp8),
      rope_(c.position_embedding_type == position_embedding_kind::rope),
      recompute_core_(c.recompute.selective(c.recompute.core_attn)),
      rot_dim_(c.rotary_dim()),
      scale_(1.0 / std::sqrt(double(c.head_dim()))) {
  dims_.heads = c.num_attention_heads / tp_size;
  dims_.groups = c.query_groups() / tp_size;
  dims_.head_dim = c.head_dim();
  dims_.head_offset = tp_rank * dims_.heads;
  dims_.total_heads = c.num_attention_heads;
  if (rope_) {
    // Tables of the model's dtype, computed once (they are not activations of a micro-batch).
    const tensor::shape_type table{c.seq_length, rot_dim_ / 2};
    cos_ = tensor::tensor(table, c.params_dtype, tensor::memory_kind::other);
    sin_ = tensor::tensor(table, c.params_dtype, tensor::memory_kind::other);
    kernels::rope_tables(cos_, sin_, c.seq_length, rot_dim_, c.rotary_base);
  }
}

void self_attention::forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                             tensor::tensor_view out, int seq, int batch, float attention_dropout,
                             std::uint64_t dropout_stream) {
  dims_.seq = seq;
  dims_.batch = batch;
  dropout_ = attention_dropout;
  stream_ = dropout_stream;
  const int rows = seq * batch;
  const std::int64_t width = dims_.qkv_width();
  auto qkv = ensure_activation(qkv_, rows, width, x.type);
  auto probs = ensure_activation(probs_, std::int64_t(batch) * dims_.heads * seq, seq, x.type);
  auto context = ensure_activation(context_, rows, std::int64_t(dims_.heads) * dims_.head_dim,
                                   x.type);
  linear_qkv_.forward(store, tp, x, qkv, rows);
  const int per_group = dims_.heads / dims_.groups;
  const std::int64_t group_stride = std::int64_t(per_group + 2) * dims_.head_dim;
  if (rope_)  // queries and the key head of each group are contiguous: rotate per_group + 1 heads
    kernels::rope_apply(qkv, cos_, sin_, seq, batch, dims_.groups, per_group + 1, dims_.head_dim,
                        rot_dim_, width, group_stride, false);
  kernels::attention_forward(context, probs, qkv, dims_, scale_, dropout_, stream_);
  linear_proj_.forward(store, tp, context, out, rows);
  if (recompute_core_) probs_ = tensor::tensor();
}

void self_attention::backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                              tensor::const_tensor_view x, tensor::tensor_view dx) {
  const int rows = dims_.seq * dims_.batch;
  const std::int64_t width = dims_.qkv_width();
  auto dcontext = ensure_activation(dcontext_, rows, std::int64_t(dims_.heads) * dims_.head_dim,
                                    dout.type);
  auto dqkv = ensure_activation(dqkv_, rows, width, dout.type);
  linear_proj_.backward(store, tp, dout, context_, dcontext, rows);
  if (recompute_core_) {  // the context is no longer needed: the rerun may overwrite it
    auto probs = ensure_activation(probs_, std::int64_t(dims_.batch) * dims_.heads * dims_.seq,
                                   dims_.seq, dout.type);
    kernels::attention_forward(context_, probs, qkv_, dims_, scale_, dropout_, stream_);
  }
  kernels::attention_backward(dqkv, dcontext, qkv_, probs_, dims_, scale_, dropout_, stream_);
  const int per_group = dims_.heads / dims_.groups;
  if (rope_)
    kernels::rope_apply(dqkv, cos_, sin_, dims_.seq, dims_.batch, dims_.groups, per_group + 1,
                        dims_.head_dim, rot_dim_, width,
                        std::int64_t(per_group + 2) * dims_.head_dim, true);
  linear_qkv_.backward(store, tp, dqkv, x, dx, rows);
}

void self_attention::release() {
  for (auto* t : {&qkv_, &probs_, &context_, &dqkv_, &dcontext_}) *t = tensor::tensor();
  linear_qkv_.release();
  linear_proj_.release();
}

}  // namespace mactor::model
