// Transformer layer: norms, attention, MLP and the two bias-dropout-add residuals.
#include "model/transformer_layer.hpp"

#include <algorithm>

#include "kernels/dropout.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/fp8_linear.hpp"

namespace mactor::model {
namespace {
// Dropout sites of a layer, mixed into the mask stream.
constexpr std::uint64_t attention_probs_site = 0;
constexpr std::uint64_t attention_residual_site = 1;
constexpr std::uint64_t mlp_residual_site = 2;
constexpr std::uint64_t moe_input_jitter_site = 3;  // --moe-input-jitter-eps

std::string prefix(const std::string& name, int number) {
  return name.empty() ? "decoder.layers." + std::to_string(number) : name;
}
int kind(int spec, int number) { return spec >= 0 ? spec : number; }

// The layer's norm before a half: its own module, or, in a hybrid model, fused into `linear`.
norm half_norm(parameter_store& store, const std::string& layer, const std::string& own,
               const std::string& linear, const gpt_model_config& c) {
  return c.hybrid() ? norm::fused_into(store, layer + linear, c) : norm(store, layer + own, c);
}

}  // namespace

transformer_layer::transformer_layer(parameter_store& store, int number, const gpt_model_config& c,
                                     int tp_rank, int tp_size, group* cp, moe_groups moe,
                                     const std::string& name, int spec)
    : number_(number), hidden_(c.hidden_size), sequence_parallel_(c.sequence_parallel),
      recompute_norms_(c.recompute.selective(c.recompute.layernorm)),
      recompute_moe_(c.recompute.selective(c.recompute.moe)),
      shard_(c.shard()), seed_(c.seed), type_(c.params_dtype),
      attention_dropout_(c.attention_dropout), hidden_dropout_(c.hidden_dropout),
      has_attention_(c.hybrid_layer_kind(kind(spec, number)) != '-'),
      has_mlp_(c.hybrid_layer_kind(kind(spec, number)) != '*') {
  const std::string at = prefix(name, number);
  const int layer = kind(spec, number);
  if (has_attention_) {
    input_layernorm_.emplace(half_norm(store, at, ".input_layernorm", ".self_attention.linear_qkv", c));
    if (c.mla.enabled)
      mla_.emplace(store, at + ".self_attention", with_layer_fp8(c, layer), layer, tp_rank, tp_size, cp);
    else
      self_attention_.emplace(store, at + ".self_attention", with_layer_fp8(c, layer), layer, tp_rank, tp_size, cp);
  }
  if (!has_mlp_) return;
  pre_mlp_layernorm_.emplace(half_norm(store, at, ".pre_mlp_layernorm", ".mlp.linear_fc1", c));
  if (c.moe.layer_is_moe(layer))
    moe_.emplace(store, at + ".mlp", with_layer_fp8(c, layer), moe);
  else
    mlp_.emplace(store, at + ".mlp", with_layer_fp8(c, layer), tp_size);
}

void transformer_layer::forward(const parameter_store& store, group& tp,
                                tensor::const_tensor_view x, tensor::tensor_view y, int seq,
                                int batch, bool training, std::uint64_t step) {
  rows_ = seq * batch;
  local_rows_ = sequence_parallel_ ? rows_ / tp.size() : rows_;
  placement_ = row_placement(shard_, batch, sequence_parallel_ ? std::int64_t(local_rows_) * tp.rank() : 0,
                             local_rows_);
  hidden_p_ = training ? hidden_dropout_ : 0.0f;
  step_ = step;
  attention_stream_ = kernels::dropout_stream(seed_, number_, attention_residual_site, step);
  mlp_stream_ = kernels::dropout_stream(seed_, number_, mlp_residual_site, step);
  if (!has_attention_) return mlp_forward(store, tp, x, y, seq, batch, training);
  // x, x1 and y are of the residual stream's dtype; the norms' outputs and the branches of the
  // model's (they differ under --fp32-residual-connection).
  auto ln1 = ensure_activation(ln1_, local_rows_, hidden_, type_);
  auto x1 = has_mlp_ ? ensure_activation(x1_, local_rows_, hidden_, x.type) : y;
  auto branch = ensure_activation(branch_, local_rows_, hidden_, type_);
  const std::uint64_t probs_stream =
      kernels::dropout_stream(seed_, number_, attention_probs_site, step);
  input_layernorm_->forward(store, x, ln1, local_rows_);
  attention_forward(store, tp, ln1, branch, seq, batch, training ? attention_dropout_ : 0.0f,
                    probs_stream);
  if (recompute_norms_) ln1_ = tensor::tensor();
  placement_.bias_dropout_add(x1, x, branch, attention_bias(store), hidden_, hidden_p_,
                              attention_stream_);
  if (has_mlp_) mlp_forward(store, tp, x1, y, seq, batch, training);
}

void transformer_layer::mlp_forward(const parameter_store& store, group& tp,
                                    tensor::const_tensor_view x1, tensor::tensor_view y, int seq,
                                    int batch, bool training) {
  auto ln2 = ensure_activation(ln2_, local_rows_, hidden_, type_);
  auto branch = ensure_activation(branch_, local_rows_, hidden_, type_);
  pre_mlp_layernorm_->forward(store, x1, ln2, local_rows_);
  if (moe_) {
    moe_seq_ = sequence_parallel_ ? seq / tp.size() : seq, moe_batch_ = batch;
    moe_stream_ = kernels::dropout_stream(seed_, number_, moe_input_jitter_site, step_);
    moe_->forward(store, tp, ln2, branch, moe_seq_, batch, training, moe_stream_);
  } else {
    mlp_->forward(store, tp, ln2, branch, rows_);
  }
  const tensor::const_tensor_view mlp_bias = moe_ ? tensor::const_tensor_view{} : mlp_->fc2_bias(store);
  placement_.bias_dropout_add(y, x1, branch, mlp_bias, hidden_, hidden_p_, mlp_stream_);
  if (recompute_norms_) ln2_ = tensor::tensor();
  if (moe_ && recompute_moe_ && training) moe_->release();
}

void transformer_layer::backward(parameter_store& store, group& tp, tensor::const_tensor_view x,
                                 tensor::const_tensor_view dy, tensor::tensor_view dx) {
  const std::int64_t n = std::int64_t(local_rows_) * hidden_;
  if (!has_attention_) return mlp_backward(store, tp, x, dy, dx);
  auto dx1 = ensure_activation(dx1_, local_rows_, hidden_, dy.type);
  if (has_mlp_)
    mlp_backward(store, tp, x1_, dy, dx1);
  else
    kernels::copy(dx1, elements(dy, 0, n));
  // Through the attention residual: dx = dx1 + norm1'(attention'(dropout(dx1))).
  auto dln = ensure_activation(dln_, local_rows_, hidden_, type_);
  if (recompute_norms_)
    input_layernorm_->forward(store, x, ensure_activation(ln1_, local_rows_, hidden_, type_),
                              local_rows_);
  ensure_activation(branch_, local_rows_, hidden_, type_);
  placement_.dropout_apply(branch_, dx1, hidden_, hidden_p_, attention_stream_);
  attention_backward(store, tp, branch_, ln1_, dln);
  kernels::copy(elements(dx, 0, n), dx1);
  input_layernorm_->backward(store, dln, x, dx, local_rows_, true);
}

void transformer_layer::mlp_backward(parameter_store& store, group& tp,
                                     tensor::const_tensor_view x1, tensor::const_tensor_view dy,
                                     tensor::tensor_view dx1) {
  const std::int64_t n = std::int64_t(local_rows_) * hidden_;
  auto dln = ensure_activation(dln_, local_rows_, hidden_, type_);
  // Through the MLP residual: dx1 = dy + norm2'(mlp'(dropout(dy))).
  if (recompute_norms_)
    pre_mlp_layernorm_->forward(store, x1, ensure_activation(ln2_, local_rows_, hidden_, type_),
                                local_rows_);
  ensure_activation(branch_, local_rows_, hidden_, type_);  // scratch: freed after an earlier backward
  if (moe_ && recompute_moe_)  // rerun the MoE forward into branch_, which the next line overwrites
    moe_->forward(store, tp, ln2_, branch_, moe_seq_, moe_batch_, true, moe_stream_);
  placement_.dropout_apply(branch_, elements(dy, 0, n), hidden_, hidden_p_, mlp_stream_);
  if (moe_)
    moe_->backward(store, tp, branch_, ln2_, dln);
  else
    mlp_->backward(store, tp, branch_, ln2_, dln);
  if (recompute_norms_) ln2_ = tensor::tensor();
  if (dx1.data != dy.data) kernels::copy(elements(dx1, 0, n), elements(dy, 0, n));
  pre_mlp_layernorm_->backward(store, dln, x1, dx1, local_rows_, true);
}

void transformer_layer::attention_forward(const parameter_store& store, group& tp,
                                          tensor::const_tensor_view x, tensor::tensor_view out,
                                          int seq, int batch, float dropout, std::uint64_t stream) {
  if (mla_) return mla_->forward(store, tp, x, out, seq, batch, dropout, stream);
  self_attention_->forward(store, tp, x, out, seq, batch, dropout, stream);
}

void transformer_layer::attention_backward(parameter_store& store, group& tp,
                                           tensor::const_tensor_view dout,
                                           tensor::const_tensor_view x, tensor::tensor_view dx) {
  if (mla_) return mla_->backward(store, tp, dout, x, dx);
  self_attention_->backward(store, tp, dout, x, dx);
}

tensor::const_tensor_view transformer_layer::attention_bias(const parameter_store& store) const {
  return mla_ ? mla_->proj_bias(store) : self_attention_->proj_bias(store);
}

void transformer_layer::set_document_starts(const std::int32_t* starts) {
  if (self_attention_) self_attention_->set_document_starts(starts);
  if (mla_) mla_->set_document_starts(starts);
}

void transformer_layer::carry(activation_stash& s) {
  s.carry(ln1_, x1_, ln2_, rows_, local_rows_, placement_, hidden_p_, step_, attention_stream_, mlp_stream_,
          moe_seq_, moe_batch_, moe_stream_);
  for (auto* n : {&input_layernorm_, &pre_mlp_layernorm_})
    if (*n) (*n)->carry(s);
  if (self_attention_) self_attention_->carry(s);
  if (mla_) mla_->carry(s);
  if (mlp_) mlp_->carry(s);
  if (moe_) moe_->carry(s);
}

void transformer_layer::release() {
  for (auto* t : {&ln1_, &x1_, &ln2_, &branch_, &dx1_, &dln_}) *t = tensor::tensor();
  if (input_layernorm_) input_layernorm_->release();
  if (self_attention_) self_attention_->release();
  if (mla_) mla_->release();
  if (pre_mlp_layernorm_) pre_mlp_layernorm_->release();
  if (mlp_) mlp_->release();
  if (moe_) moe_->release();
}

}  // namespace mactor::model
