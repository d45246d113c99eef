// MoE layer: router, local dispatch, experts, combine.
#include "model/moe_layer.hpp"

#include <stdexcept>
#include <string>

#include "kernels/convert.hpp"
#include "kernels/moe_permute.hpp"
#include "model/activation.hpp"
#include "model/host_exchange.hpp"

namespace mactor::model {
namespace {

// The shared expert is Megatron's MLP with ffn_hidden_size = the shared intermediate size.
gpt_model_config shared_expert_config(gpt_model_config c) {
  c.ffn_hidden_size = c.moe.shared_expert_intermediate_size;
  return c;
}

}  // namespace

moe_layer::moe_layer(parameter_store& store, const std::string& name, const gpt_model_config& c, moe_groups groups)
    : hidden_(c.hidden_size), sequence_parallel_(c.sequence_parallel), router_dtype_(c.moe.router_dtype),
      expert_tensor_parallel_(c.moe.expert_tensor_parallel_size), local_experts_(c.moe.local_experts()),
      padding_multiple_(c.moe.router_padding_multiple), delay_wgrad_(c.moe.delay_wgrad_compute),
      router_(store, name + ".router", c, groups.sequence_shards, groups.global_batch),
      dispatcher_(c.moe.num_experts, c.moe.router_topk), experts_(store, name + ".experts", c) {
  group* ep = groups.expert_parallel;
  if (expert_tensor_parallel_ > 1 && expert_tensor_parallel_ != c.tensor_model_parallel_size) {
    if (!groups.expert_tensor_parallel || groups.expert_tensor_parallel->size() != expert_tensor_parallel_)
      throw std::invalid_argument("moe_layer " + name + ": expert_tensor_parallel_size " +
                                  std::to_string(expert_tensor_parallel_) + " needs an expert-tensor-parallel group of that size");
    tensor_exchange_.emplace(*groups.expert_tensor_parallel, local_experts_);
  }
  if (c.moe.expert_parallel_size > 1) {
    if (!ep || ep->size() != c.moe.expert_parallel_size || ep->rank() != c.moe.expert_parallel_rank)
      throw std::invalid_argument("moe_layer " + name + ": expert_parallel_size " + std::to_string(c.moe.expert_parallel_size) +
                                  " needs an expert-parallel group of that size, with this rank at expert_parallel_rank");
    exchange_.emplace(c.moe.num_experts, *ep);
  }
  if (c.moe.shared_expert_intermediate_size > 0)
    shared_.emplace(store, name + ".shared_experts", shared_expert_config(c), c.tensor_model_parallel_size);
}

void moe_layer::forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                        tensor::tensor_view out, int seq, int batch, bool training, std::uint64_t noise_stream) {
  rows_ = seq * batch;
  full_rows_ = sequence_parallel_ ? rows_ * tp.size() : rows_;
  if (expert_tensor_parallel_ > 1 && !tensor_exchange_) tensor_exchange_.emplace(tp, local_experts_);
  router_.forward(store, x, seq, batch, training, noise_stream);
  dispatcher_.plan(router_.top(), router_.kept(), rows_, padding_multiple_);
  const std::int64_t n = dispatcher_.permuted_rows();
  auto permuted = ensure_activation(permuted_, n, hidden_, x.type);
  dispatcher_.dispatch(x, permuted, hidden_);
  // The probabilities in expert order, in the logits' dtype (the router's, else the activations');
  // a padding row's is 0.
  std::vector<double> probs(n, 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    if (const auto choice = dispatcher_.choice_of()[i]; choice >= 0) probs[i] = router_.probs()[choice];
  auto p = ensure_activation(permuted_probs_, n, 1, probs_type(x.type));
  convert_across(p, tensor::view_of(std::span<const double>(probs)));
  auto expert_out = ensure_activation(expert_out_, n, hidden_, x.type);
  if (exchange_) {
    exchange_->plan(dispatcher_.tokens_per_expert());
    const std::int64_t m = exchange_->received_rows();
    auto in = ensure_activation(expert_in_, m, hidden_, x.type);
    auto in_probs = ensure_activation(expert_in_probs_, m, 1, p.type);
    exchange_->to_experts(permuted, in, hidden_);
    exchange_->to_experts(p, in_probs, 1);
    auto local_out = ensure_activation(expert_local_out_, m, hidden_, x.type);
    experts_forward(store, in, in_probs, exchange_->local_tokens_per_expert(), local_out);
    exchange_->from_experts(local_out, expert_out, hidden_);
  } else {
    experts_forward(store, permuted, p, dispatcher_.tokens_per_expert(), expert_out);
  }
  dispatcher_.combine(expert_out, out, rows_, hidden_);
  if (shared_) {
    identity_.resize(rows_);
    for (int i = 0; i < rows_; ++i) identity_[i] = i;
    auto shared = ensure_activation(shared_out_, rows_, hidden_, x.type);
    shared_->forward(store, tp, x, shared, full_rows_);
    kernels::scatter_add_rows(out, shared, identity_, hidden_);
  }
}

void moe_layer::backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                         tensor::const_tensor_view x, tensor::tensor_view dx) {
  const std::int64_t n = dispatcher_.permuted_rows();
  auto dexpert_out = ensure_activation(dexpert_out_, n, hidden_, dout.type);
  auto dpermuted = ensure_activation(dpermuted_, n, hidden_, dout.type);
  auto dp = ensure_activation(dpermuted_probs_, n, 1, probs_type(dout.type));
  dispatcher_.combine_backward(dout, dexpert_out, hidden_);
  if (exchange_) {
    const std::int64_t m = exchange_->received_rows();
    auto din = ensure_activation(dexpert_in_, m, hidden_, dout.type);
    exchange_->to_experts(dexpert_out, din, hidden_);
    experts_backward_and_return(store, din, dpermuted, dp);
  } else {
    experts_backward(store, dexpert_out, permuted_, dpermuted, dp);
  }
  dispatcher_.dispatch_backward(dpermuted, dx, rows_, hidden_);
  std::vector<double> dpermuted_probs(n), dprobs(std::size_t(rows_) * router_.topk());
  convert_across(tensor::view_of(std::span<double>(dpermuted_probs)), dp);
  for (std::int64_t i = 0; i < n; ++i)  // a padding row's probability is no choice's: dropped
    if (const auto choice = dispatcher_.choice_of()[i]; choice >= 0) dprobs[choice] = dpermuted_probs[i];
  router_.backward(store, dprobs, x, dx, aux_loss_scale_);
  if (shared_) {
    auto dshared = ensure_activation(shared_out_, rows_, hidden_, dout.type);
    shared_->backward(store, tp, dout, x, dshared);
    kernels::scatter_add_rows(dx, dshared, identity_, hidden_);
  }
}

void moe_layer::experts_forward(const parameter_store& store, tensor::const_tensor_view in,
                                tensor::const_tensor_view in_probs, const std::vector<std::int64_t>& counts,
                                tensor::tensor_view out) {
  if (!tensor_exchange_) return experts_.forward(store, in, in_probs, counts, out);
  tensor_exchange_->plan(counts);
  const std::int64_t n = tensor_exchange_->gathered_rows();
  auto gathered = ensure_activation(gathered_in_, n, hidden_, in.type);
  auto gathered_probs = ensure_activation(gathered_probs_, n, 1, in_probs.type);
  tensor_exchange_->gather(in, gathered, hidden_);
  tensor_exchange_->gather(in_probs, gathered_probs, 1);
  auto partial = ensure_activation(gathered_out_, n, hidden_, in.type);
  experts_.forward(store, gathered, gathered_probs, tensor_exchange_->gathered_tokens_per_expert(), partial);
  sum_expert_shards(partial, out, in_probs.type);
}

void moe_layer::experts_backward_and_return(parameter_store& store, tensor::const_tensor_view din,
                                            tensor::tensor_view dpermuted, tensor::tensor_view dprobs) {
  const std::int64_t m = exchange_->received_rows();
  auto dlocal = ensure_activation(dexpert_local_in_, m, hidden_, din.type);
  auto dlocal_probs = ensure_activation(dexpert_local_probs_, m, 1, dprobs.type);
  const auto give_back = [&] {
    exchange_->from_experts(dlocal, dpermuted, hidden_);
    exchange_->from_experts(dlocal_probs, dprobs, 1);
  };
  // A zero-bubble schedule collecting the weight gradients for its own W pass keeps them.
  auto& weight_grads = store.weight_grads();
  if (!delay_wgrad_ || weight_grads.collecting()) {
    experts_backward(store, din, expert_in_, dlocal, dlocal_probs);
    give_back();
    return;
  }
  // The experts' saved activations and din stay as they are until the work runs below: no copies.
  constexpr int this_layer = -1;
  weight_grads.begin_collecting(this_layer, /*copy_inputs=*/false);
  experts_backward(store, din, expert_in_, dlocal, dlocal_probs);
  weight_grads.stop_collecting();
  timed_transfer exchange(give_back, overlap_);
  weight_grads.run(this_layer);  // the experts' weight gradients while the all-to-all runs
  exchange.wait();
}

tensor::dtype moe_layer::probs_type(tensor::dtype activations) const {
  if (!router_dtype_ || tensor::size_of(activations) >= 4) return activations;
  return tensor::dtype::float32;
}

void moe_layer::sum_expert_shards(tensor::const_tensor_view partial, tensor::tensor_view out, tensor::dtype probs) {
  if (probs == partial.type) return tensor_exchange_->scatter_sum(partial, out, hidden_);
  auto wide = ensure_activation(wide_partial_, partial.numel() / hidden_, hidden_, probs);
  kernels::convert(wide, partial);
  auto sum = ensure_activation(wide_out_, out.numel() / hidden_, hidden_, probs);
  tensor_exchange_->scatter_sum(wide, sum, hidden_);
  kernels::convert(out, sum);
}

void moe_layer::experts_backward(parameter_store& store, tensor::const_tensor_view dout, tensor::const_tensor_view in,
                                 tensor::tensor_view dx, tensor::tensor_view dprobs) {
  if (!tensor_exchange_) return experts_.backward(store, dout, in, dx, dprobs);
  // The reduce-scatter's gradient is the all-gather and the reverse: the shards' input and
  // probability gradients are partial sums.
  const std::int64_t n = tensor_exchange_->gathered_rows();
  auto d = ensure_activation(dgathered_out_, n, hidden_, dout.type);
  tensor_exchange_->gather(dout, d, hidden_);
  auto dgathered = ensure_activation(dgathered_in_, n, hidden_, dout.type);
  auto dgathered_probs = ensure_activation(dgathered_probs_, n, 1, dprobs.type);
  experts_.backward(store, d, gathered_in_, dgathered, dgathered_probs);
  tensor_exchange_->scatter_sum(dgathered, dx, hidden_);
  tensor_exchange_->scatter_sum(dgathered_probs, dprobs, 1);
}

void moe_layer::carry(activation_stash& s) {
  s.carry(rows_, full_rows_, identity_, permuted_, permuted_probs_, expert_in_, gathered_in_);
  router_.carry(s);
  dispatcher_.carry(s);
  experts_.carry(s);
  if (shared_) shared_->carry(s);
  if (exchange_) exchange_->carry(s);
  if (tensor_exchange_) tensor_exchange_->carry(s);
}

void moe_layer::release() {
  for (auto* t : {&permuted_, &permuted_probs_, &expert_out_, &dexpert_out_, &dpermuted_, &dpermuted_probs_,
                  &expert_in_, &expert_in_probs_, &expert_local_out_, &dexpert_in_, &dexpert_local_in_,
                  &dexpert_local_probs_, &gathered_in_, &gathered_probs_, &gathered_out_, &dgathered_out_,
                  &dgathered_in_, &dgathered_probs_, &wide_partial_, &wide_out_})
    *t = tensor::tensor();
  experts_.release();
  shared_out_ = tensor::tensor();
  if (shared_) shared_->release();
}

}  // namespace mactor::model
