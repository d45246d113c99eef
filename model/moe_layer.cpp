// MoE layer: router, local dispatch, experts, combine.
#include "model/moe_layer.hpp"

#include <stdexcept>
#include <string>

#include "kernels/convert.hpp"
#include "kernels/moe_permute.hpp"
#include "model/activation.hpp"

namespace mactor::model {
namespace {

// The shared expert is Megatron's MLP with ffn_hidden_size = the shared intermediate size.
gpt_model_config shared_expert_config(gpt_model_config c) {
  c.ffn_hidden_size = c.moe.shared_expert_intermediate_size;
  return c;
}

}  // namespace

moe_layer::moe_layer(parameter_store& store, const std::string& name, const gpt_model_config& c, group* ep,
                     group* sequence_shards)
    : hidden_(c.hidden_size), router_(store, name + ".router", c, sequence_shards),
      dispatcher_(c.moe.num_experts, c.moe.router_topk), experts_(store, name + ".experts", c) {
  if (c.moe.expert_parallel_size > 1) {
    if (!ep || ep->size() != c.moe.expert_parallel_size || ep->rank() != c.moe.expert_parallel_rank)
      throw std::invalid_argument("moe_layer " + name + ": expert_parallel_size " + std::to_string(c.moe.expert_parallel_size) +
                                  " needs an expert-parallel group of that size, with this rank at expert_parallel_rank");
    exchange_.emplace(c.moe.num_experts, *ep);
  }
  if (c.moe.shared_expert_intermediate_size > 0)
    shared_.emplace(store, name + ".shared_experts", shared_expert_config(c), 1);
}

void moe_layer::forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                        tensor::tensor_view out, int seq, int batch, bool training, std::uint64_t noise_stream) {
  rows_ = seq * batch;
  router_.forward(store, x, seq, batch, training, noise_stream);
  dispatcher_.plan(router_.top(), router_.kept(), rows_);
  const std::int64_t n = dispatcher_.permuted_rows();
  auto permuted = ensure_activation(permuted_, n, hidden_, x.type);
  dispatcher_.dispatch(x, permuted, hidden_);
  // The probabilities in expert order, in the activations' dtype (Megatron's probs are of the
  // logits' dtype).
  std::vector<double> probs(n);
  for (std::int64_t i = 0; i < n; ++i) probs[i] = router_.probs()[dispatcher_.choice_of()[i]];
  auto p = ensure_activation(permuted_probs_, n, 1, x.type);
  kernels::convert(p, tensor::view_of(std::span<const double>(probs)));
  auto expert_out = ensure_activation(expert_out_, n, hidden_, x.type);
  if (exchange_) {
    exchange_->plan(dispatcher_.tokens_per_expert());
    const std::int64_t m = exchange_->received_rows();
    auto in = ensure_activation(expert_in_, m, hidden_, x.type);
    auto in_probs = ensure_activation(expert_in_probs_, m, 1, x.type);
    exchange_->to_experts(permuted, in, hidden_);
    exchange_->to_experts(p, in_probs, 1);
    auto local_out = ensure_activation(expert_local_out_, m, hidden_, x.type);
    experts_.forward(store, in, in_probs, exchange_->local_tokens_per_expert(), local_out);
    exchange_->from_experts(local_out, expert_out, hidden_);
  } else {
    experts_.forward(store, permuted, p, dispatcher_.tokens_per_expert(), expert_out);
  }
  dispatcher_.combine(expert_out, out, rows_, hidden_);
  if (shared_) {
    identity_.resize(rows_);
    for (int i = 0; i < rows_; ++i) identity_[i] = i;
    auto shared = ensure_activation(shared_out_, rows_, hidden_, x.type);
    shared_->forward(store, tp, x, shared, rows_);
    kernels::scatter_add_rows(out, shared, identity_, hidden_);
  }
}

void moe_layer::backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                         tensor::const_tensor_view x, tensor::tensor_view dx) {
  const std::int64_t n = dispatcher_.permuted_rows();
  auto dexpert_out = ensure_activation(dexpert_out_, n, hidden_, dout.type);
  auto dpermuted = ensure_activation(dpermuted_, n, hidden_, dout.type);
  auto dp = ensure_activation(dpermuted_probs_, n, 1, dout.type);
  dispatcher_.combine_backward(dout, dexpert_out, hidden_);
  if (exchange_) {
    const std::int64_t m = exchange_->received_rows();
    auto din = ensure_activation(dexpert_in_, m, hidden_, dout.type);
    auto dlocal = ensure_activation(dexpert_local_in_, m, hidden_, dout.type);
    auto dlocal_probs = ensure_activation(dexpert_local_probs_, m, 1, dout.type);
    exchange_->to_experts(dexpert_out, din, hidden_);
    experts_.backward(store, din, expert_in_, dlocal, dlocal_probs);
    exchange_->from_experts(dlocal, dpermuted, hidden_);
    exchange_->from_experts(dlocal_probs, dp, 1);
  } else {
    experts_.backward(store, dexpert_out, permuted_, dpermuted, dp);
  }
  dispatcher_.dispatch_backward(dpermuted, dx, rows_, hidden_);
  std::vector<double> dpermuted_probs(n), dprobs(std::size_t(rows_) * router_.topk());
  kernels::convert(tensor::view_of(std::span<double>(dpermuted_probs)), dp);
  for (std::int64_t i = 0; i < n; ++i) dprobs[dispatcher_.choice_of()[i]] = dpermuted_probs[i];
  router_.backward(store, dprobs, x, dx, aux_loss_scale_);
  if (shared_) {
    auto dshared = ensure_activation(shared_out_, rows_, hidden_, dout.type);
    shared_->backward(store, tp, dout, x, dshared);
    kernels::scatter_add_rows(dx, dshared, identity_, hidden_);
  }
}

void moe_layer::release() {
  for (auto* t : {&permuted_, &permuted_probs_, &expert_out_, &dexpert_out_, &dpermuted_, &dpermuted_probs_,
                  &expert_in_, &expert_in_probs_, &expert_local_out_, &dexpert_in_, &dexpert_local_in_,
                  &dexpert_local_probs_})
    *t = tensor::tensor();
  experts_.release();
  shared_out_ = tensor::tensor();
  if (shared_) shared_->release();
}

}  // namespace mactor::model
