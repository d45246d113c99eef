// Self-attention block: qkv projection, rope, attention core, output projection.
#include "model/self_attention.hpp"

#include <cmath>

#include "kernels/rope.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"

namespace mactor::model {

self_attention::self_attention(parameter_store& store, const std::string& name,
                               const gpt_model_config& c, int layer, int tp_rank, int tp_size)
    : softmax_offset_(c.softmax_type != softmax_kind::learnable
                          ? -1
                          : store.add(name + ".core_attention.softmax_offset",
                                      {c.num_attention_heads}, tp_split::rows, init_kind::zeros)),
      linear_qkv_(store, name + ".linear_qkv", c.hidden_size,
                  c.query_groups() * (c.num_attention_heads / c.query_groups() + 2) * c.head_dim(),
                  c.add_bias_linear || c.add_qkv_bias, tp_split::rows, c.init_method_std,
                  tp_size, c.sequence_parallel, c.fp8),
      linear_proj_(store, name + ".linear_proj", c.num_attention_heads * c.head_dim(),
                   c.hidden_size, c.add_bias_linear,
                   c.init_method_std / std::sqrt(2.0 * c.num_layers), tp_size,
                   c.sequence_parallel, c.fp8),
      rope_(c.layer_applies_rope(layer)),
      rope_interleaved_(c.rotary_interleaved),
      recompute_core_(c.recompute.selective(c.recompute.core_attn)),
      rot_dim_(c.rotary_dim()),
      scale_(1.0 / std::sqrt(double(c.head_dim()))) {
  dims_.heads = c.num_attention_heads / tp_size;
  dims_.groups = c.query_groups() / tp_size;
  dims_.head_dim = c.head_dim();
  dims_.head_offset = tp_rank * dims_.heads;
  dims_.total_heads = c.num_attention_heads;
  dims_.window = c.layer_attention_window(layer);
  if (c.softmax_type == softmax_kind::off_by_one) {
    zero_sink_ = tensor::tensor({dims_.heads}, c.params_dtype, tensor::memory_kind::other);
    kernels::fill_zero(zero_sink_);
  }
  if (rope_) {
    // Tables of the model's dtype, computed once (they are not activations of a micro-batch).
    const tensor::shape_type table{c.seq_length, rot_dim_ / 2};
    cos_ = tensor::tensor(table, c.params_dtype, tensor::memory_kind::other);
    sin_ = tensor::tensor(table, c.params_dtype, tensor::memory_kind::other);
    kernels::rope_frequencies f;
    f.base = c.rotary_base;
    f.seq_len_interpolation_factor = c.rotary_seq_len_interpolation_factor;
    f.llama3_scaling = c.use_rope_scaling;
    f.scaling_factor = c.rope_scaling_factor;
    kernels::rope_tables(cos_, sin_, c.seq_length, rot_dim_, f);
  }
}

tensor::const_tensor_view self_attention::sink(const parameter_store& store) const {
  if (softmax_offset_ >= 0) return store.value(softmax_offset_);
  return zero_sink_;
}

void self_attention::core_forward(const parameter_store& store, tensor::tensor_view context,
                                  tensor::tensor_view probs) {
  kernels::attention_forward(context, probs, qkv_, dims_, scale_, dropout_, stream_, sink(store));
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
                        rot_dim_, width, group_stride, rope_interleaved_, false);
  core_forward(store, context, probs);
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
    core_forward(store, context_, probs);
  }
  kernels::attention_backward(dqkv, dcontext, qkv_, probs_, dims_, scale_, dropout_, stream_,
                              sink(store), store.grad(softmax_offset_));
  const int per_group = dims_.heads / dims_.groups;
  if (rope_)
    kernels::rope_apply(dqkv, cos_, sin_, dims_.seq, dims_.batch, dims_.groups, per_group + 1,
                        dims_.head_dim, rot_dim_, width,
                        std::int64_t(per_group + 2) * dims_.head_dim, rope_interleaved_, true);
  linear_qkv_.backward(store, tp, dqkv, x, dx, rows);
}

void self_attention::release() {
  for (auto* t : {&qkv_, &probs_, &context_, &dqkv_, &dcontext_}) *t = tensor::tensor();
  linear_qkv_.release();
  linear_proj_.release();
}

}  // namespace mactor::model
