// Self-attention block: qkv projection, rope, attention core, output projection.
#include "model/self_attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/dispatch.hpp"
#include "kernels/rope.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "tensor/default_device.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {
namespace {

// Moves the query heads of qkv ([rows, groups, heads / groups + 2, head_dim]) to or from
// q [rows * heads, head_dim], and its key heads to or from k [rows * groups, head_dim].
void move_heads(tensor::tensor_view qkv, tensor::tensor_view q, tensor::tensor_view k,
                const kernels::attention_dims& d, int rows, bool from_qkv) {
  const int per_group = d.heads / d.groups;
  const std::int64_t hd = d.head_dim, width = d.qkv_width();
  for (std::int64_t r = 0; r < rows; ++r)
    for (int g = 0; g < d.groups; ++g) {
      const std::int64_t at = r * width + std::int64_t(g) * (per_group + 2) * hd;
      auto q_part = elements(qkv, at, per_group * hd), k_part = elements(qkv, at + per_group * hd, hd);
      auto q_rows = elements(q, (r * d.heads + std::int64_t(g) * per_group) * hd, per_group * hd);
      auto k_row = elements(k, (r * d.groups + g) * hd, hd);
      if (from_qkv)
        kernels::copy(q_rows, q_part), kernels::copy(k_row, k_part);
      else
        kernels::copy(q_part, q_rows), kernels::copy(k_part, k_row);
    }
}

}  // namespace

self_attention::self_attention(parameter_store& store, const std::string& name,
                               const gpt_model_config& c, int layer, int tp_rank, int tp_size,
                               group* cp)
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
                   c.output_layer_init_std(), tp_size,
                   c.sequence_parallel, c.fp8),
      rope_(c.layer_applies_rope(layer)),
      rope_interleaved_(c.rotary_interleaved),
      recompute_core_(c.recompute.selective(c.recompute.core_attn)),
      rot_dim_(c.rotary_dim()),
      scale_(1.0 / std::sqrt(double(c.head_dim()))), shard_(c.shard()), cp_(cp) {
  if (shard_.cp_size > 1 && (!cp_ || cp_->size() != shard_.cp_size || cp_->rank() != shard_.cp_rank))
    throw std::invalid_argument("self_attention: context_parallel_size=" + std::to_string(shard_.cp_size) +
                                " needs the context-parallel group of that size with this rank's place");
  if (shard_.cp_size > 1 && c.cp_comm(layer) == cp_comm_kind::p2p) ring_.emplace(*cp_, shard_);
  if (shard_.cp_size > 1 && c.cp_comm(layer) == cp_comm_kind::a2a)
    ulysses_.emplace(*cp_, shard_, c.query_groups() / tp_size);
  if (shard_.cp_size > 1 && c.cp_comm(layer) == cp_comm_kind::a2a_p2p) {
    const auto& levels = cp_->levels();
    if (levels.size() != 2)
      throw std::invalid_argument("--cp-comm-type a2a+p2p needs two hierarchical context-parallel groups "
                                  "(--hierarchical-context-parallel-sizes with two sizes), not " +
                                  std::to_string(levels.size()));
    hierarchical_.emplace(*levels[0], *levels[1], shard_, c.query_groups() / tp_size);
  }
  dims_.heads = c.num_attention_heads / tp_size;
  dims_.groups = c.query_groups() / tp_size;
  dims_.head_dim = c.head_dim();
  dims_.head_offset = tp_rank * dims_.heads;
  dims_.total_heads = c.num_attention_heads;
  dims_.window = c.layer_attention_window(layer);
  if (c.qk_l2_norm) {  // Megatron's specs put L2Norm in the slots whether or not --qk-layernorm is set
    q_l2_norm_.emplace(c.head_dim(), c.norm_epsilon);
    k_l2_norm_.emplace(c.head_dim(), c.norm_epsilon);
  } else if (c.qk_layernorm) {
    q_layernorm_.emplace(store, name + ".q_layernorm", c, c.head_dim());
    k_layernorm_.emplace(store, name + ".k_layernorm", c, c.head_dim());
  }
  if (c.softmax_type == softmax_kind::off_by_one) {
    zero_sink_ = tensor::tensor({dims_.heads}, c.params_dtype, tensor::memory_kind::other, tensor::default_device());
  }
  if (rope_) {
    // Tables of the model's dtype, computed once on the host (they are not activations of a
    // micro-batch), then this rank's rows copied to the model's device.
    const tensor::shape_type table{c.seq_length, rot_dim_ / 2};
    tensor::tensor cos(table, c.params_dtype, tensor::memory_kind::other);
    tensor::tensor sin(table, c.params_dtype, tensor::memory_kind::other);
    kernels::rope_frequencies f;
    f.base = c.rotary_base;
    f.seq_len_interpolation_factor = c.rotary_seq_len_interpolation_factor;
    f.llama3_scaling = c.use_rope_scaling;
    f.scaling_factor = c.rope_scaling_factor;
    kernels::rope_tables(cos, sin, c.seq_length, rot_dim_, f);
    // The rows of this rank's positions (all of them without context parallelism).
    const tensor::shape_type local{shard_.local_length(), rot_dim_ / 2};
    cos_ = tensor::tensor(local, c.params_dtype, tensor::memory_kind::other, tensor::default_device());
    sin_ = tensor::tensor(local, c.params_dtype, tensor::memory_kind::other, tensor::default_device());
    const std::int64_t row = rot_dim_ / 2;
    for (const auto& r : shard_.runs()) {
      tensor::copy_between(elements(cos_.view(), r.local * row, r.length * row),
                           elements(cos.view(), r.global * row, r.length * row));
      tensor::copy_between(elements(sin_.view(), r.local * row, r.length * row),
                           elements(sin.view(), r.global * row, r.length * row));
    }
  }
}

tensor::const_tensor_view self_attention::sink(const parameter_store& store) const {
  if (softmax_offset_ >= 0) return store.value(softmax_offset_);
  return zero_sink_;
}

void self_attention::qk_norm_forward(const parameter_store& store, tensor::tensor_view qkv, int rows) {
  const std::int64_t hd = dims_.head_dim;
  auto q_in = ensure_activation(q_in_, std::int64_t(rows) * dims_.heads, hd, qkv.type);
  auto k_in = ensure_activation(k_in_, std::int64_t(rows) * dims_.groups, hd, qkv.type);
  auto q_out = ensure_activation(q_out_, std::int64_t(rows) * dims_.heads, hd, qkv.type);
  auto k_out = ensure_activation(k_out_, std::int64_t(rows) * dims_.groups, hd, qkv.type);
  move_heads(qkv, q_in, k_in, dims_, rows, true);
  if (q_l2_norm_) {
    q_l2_norm_->forward(q_in, q_out, rows * dims_.heads);
    k_l2_norm_->forward(k_in, k_out, rows * dims_.groups);
  } else {
    q_layernorm_->forward(store, q_in, q_out, rows * dims_.heads);
    k_layernorm_->forward(store, k_in, k_out, rows * dims_.groups);
  }
  move_heads(qkv, q_out, k_out, dims_, rows, false);
}

void self_attention::qk_norm_backward(parameter_store& store, tensor::tensor_view dqkv, int rows) {
  const std::int64_t hd = dims_.head_dim;
  auto dq = ensure_activation(q_out_, std::int64_t(rows) * dims_.heads, hd, dqkv.type);
  auto dk = ensure_activation(k_out_, std::int64_t(rows) * dims_.groups, hd, dqkv.type);
  move_heads(dqkv, dq, dk, dims_, rows, true);
  tensor::tensor dq_in, dk_in;
  auto dq_view = ensure_activation(dq_in, dq.shape[0], hd, dqkv.type);
  auto dk_view = ensure_activation(dk_in, dk.shape[0], hd, dqkv.type);
  if (q_l2_norm_) {
    q_l2_norm_->backward(dq, q_in_, dq_view, rows * dims_.heads, false);
    k_l2_norm_->backward(dk, k_in_, dk_view, rows * dims_.groups, false);
  } else {
    q_layernorm_->backward(store, dq, q_in_, dq_view, rows * dims_.heads, false);
    k_layernorm_->backward(store, dk, k_in_, dk_view, rows * dims_.groups, false);
  }
  move_heads(dqkv, dq_in, dk_in, dims_, rows, false);
}

void self_attention::set_dims(int seq, int batch) {
  dims_.seq = seq;
  dims_.batch = batch;
  if (shard_.cp_size == 1) return;
  dims_.kv_seq = shard_.seq_length;
  const auto runs = shard_.runs();
  dims_.num_runs = int(runs.size());
  std::copy(runs.begin(), runs.end(), dims_.runs.begin());
}

void self_attention::core_forward(const parameter_store& store, tensor::tensor_view context,
                                  tensor::tensor_view probs) {
  if (ring_) {
    // The log-sum-exp stays in the compute type (fp32 for a 16-bit model), as TE keeps it.
    auto lse = ensure_activation(lse_, std::int64_t(dims_.seq) * dims_.batch, dims_.heads,
                                 kernels::compute_dtype(context.type));
    ring_->forward(context, lse, qkv_, dims_, scale_, dropout_, stream_, sink(store));
    return;
  }
  if (ulysses_) return ulysses_->forward(context, qkv_, dims_, scale_, dropout_, stream_, sink(store));
  if (hierarchical_) return hierarchical_->forward(context, qkv_, dims_, scale_, dropout_, stream_, sink(store));
  kernels::attention_forward(context, probs, qkv_, dims_, scale_, dropout_, stream_, sink(store),
                             kv_.numel() ? tensor::const_tensor_view(kv_) : tensor::const_tensor_view{});
}

void self_attention::core_backward(parameter_store& store, tensor::tensor_view dqkv) {
  if (ring_) {
    ring_->backward(dqkv, dcontext_, qkv_, context_, lse_, dims_, scale_, dropout_, stream_, sink(store),
                    store.grad(softmax_offset_));
    return;
  }
  if (ulysses_)
    return ulysses_->backward(dqkv, dcontext_, dims_, scale_, dropout_, stream_, sink(store), store.grad(softmax_offset_));
  if (hierarchical_)
    return hierarchical_->backward(dqkv, dcontext_, dims_, scale_, dropout_, stream_, sink(store),
                                   store.grad(softmax_offset_));
  if (shard_.cp_size == 1) {
    kernels::attention_backward(dqkv, dcontext_, qkv_, probs_, dims_, scale_, dropout_, stream_,
                                sink(store), store.grad(softmax_offset_));
    return;
  }
  // The queries' gradient lands in dqkv (its key and value parts zero); the keys' and values'
  // in the whole sequence's dkv (its query parts zero), summed over the ranks and added.
  auto dkv = ensure_activation(dkv_, kv_.shape()[0], kv_.shape()[1], dqkv.type);
  kernels::fill_zero(dqkv);
  kernels::fill_zero(dkv);
  kernels::attention_backward(dqkv, dcontext_, qkv_, probs_, dims_, scale_, dropout_, stream_,
                              sink(store), store.grad(softmax_offset_), kv_, dkv);
  auto mine = ensure_activation(dkv_local_, dqkv.shape[0], dqkv.shape[1], dqkv.type);
  reduce_scatter_sequence(*cp_, shard_, dims_.batch, dkv, mine);
  kernels::add(dqkv, mine);
}

void self_attention::forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                             tensor::tensor_view out, int seq, int batch, float attention_dropout,
                             std::uint64_t dropout_stream) {
  set_dims(seq, batch);
  dropout_ = attention_dropout;
  stream_ = dropout_stream;
  const int rows = seq * batch;
  const std::int64_t width = dims_.qkv_width();
  auto qkv = ensure_activation(qkv_, rows, width, x.type);
  // Ring attention keeps no probabilities (its backward recomputes them block by block).
  auto probs = exchanges_blocks() ? tensor::tensor_view{}
                     : ensure_activation(probs_, std::int64_t(batch) * dims_.heads * seq, dims_.keys(), x.type);
  auto context = ensure_activation(context_, rows, std::int64_t(dims_.heads) * dims_.head_dim,
                                   x.type);
  linear_qkv_.forward(store, tp, x, qkv, rows);
  if (q_layernorm_ || q_l2_norm_) qk_norm_forward(store, qkv, rows);
  const int per_group = dims_.heads / dims_.groups;
  const std::int64_t group_stride = std::int64_t(per_group + 2) * dims_.head_dim;
  if (rope_)  // queries and the key head of each group are contiguous: rotate per_group + 1 heads
    kernels::rope_apply(qkv, cos_, sin_, seq, batch, dims_.groups, per_group + 1, dims_.head_dim,
                        rot_dim_, width, group_stride, rope_interleaved_, false);
  if (shard_.cp_size > 1 && !exchanges_blocks())
    gather_sequence(*cp_, shard_, batch, qkv,
                    ensure_activation(kv_, std::int64_t(shard_.seq_length) * batch, width, x.type));
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
  if (recompute_core_ && !exchanges_blocks()) {  // the context is no longer needed: the rerun may overwrite it
    auto probs = ensure_activation(probs_, std::int64_t(dims_.batch) * dims_.heads * dims_.seq,
                                   dims_.keys(), dout.type);
    core_forward(store, context_, probs);
  }
  core_backward(store, dqkv);
  const int per_group = dims_.heads / dims_.groups;
  if (rope_)
    kernels::rope_apply(dqkv, cos_, sin_, dims_.seq, dims_.batch, dims_.groups, per_group + 1,
                        dims_.head_dim, rot_dim_, width,
                        std::int64_t(per_group + 2) * dims_.head_dim, rope_interleaved_, true);
  if (q_layernorm_ || q_l2_norm_) qk_norm_backward(store, dqkv, rows);
  linear_qkv_.backward(store, tp, dqkv, x, dx, rows);
}

void self_attention::carry(activation_stash& s) {
  // Under context parallelism: the gathered keys and values (allgather), the log-sum-exp (ring),
  // the head-sharded copies (Ulysses, a2a+p2p).
  s.carry(qkv_, probs_, context_, q_in_, k_in_, dims_, dropout_, stream_, kv_, lse_);
  if (ring_) ring_->carry(s);
  if (ulysses_) ulysses_->carry(s);
  if (hierarchical_) hierarchical_->carry(s);
  if (q_layernorm_) q_layernorm_->carry(s), k_layernorm_->carry(s);
  if (q_l2_norm_) q_l2_norm_->carry(s), k_l2_norm_->carry(s);
}

void self_attention::release() {
  for (auto* t : {&qkv_, &probs_, &context_, &kv_, &dqkv_, &dcontext_, &dkv_, &dkv_local_, &lse_, &q_in_,
                 &k_in_, &q_out_, &k_out_})
    *t = tensor::tensor();
  if (q_layernorm_) q_layernorm_->release(), k_layernorm_->release();
  if (q_l2_norm_) q_l2_norm_->release(), k_l2_norm_->release();
  if (ring_) ring_->release();
  if (ulysses_) ulysses_->release();
  if (hierarchical_) hierarchical_->release();
  linear_qkv_.release();
  linear_proj_.release();
}

}  // namespace mactor::model
