// Megatron-Core's MoE layer in place of a transformer layer's MLP: route (moe_router), permute
// the tokens to their experts (moe_token_dispatcher), send them to the expert-parallel ranks
// owning those experts (moe_expert_exchange, with --expert-model-parallel-size > 1), run the
// local experts (moe_experts), bring the outputs back, unpermute and sum each token's expert outputs weighted by its
// router probabilities, plus the shared expert's output (Megatron's SharedExpertMLP, when
// --moe-shared-expert-intermediate-size is given). The output has no bias.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model/activation_stash.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/mlp.hpp"
#include "model/moe_experts.hpp"
#include "model/moe_expert_exchange.hpp"
#include "model/moe_expert_tensor_exchange.hpp"
#include "model/timed_transfer.hpp"
#include "model/moe_groups.hpp"
#include "model/moe_router.hpp"
#include "model/moe_token_dispatcher.hpp"

namespace mactor::model {

class moe_layer {
 public:
  /// Registers name.router.weight, the experts under name.experts and the shared expert's
  /// name.shared_experts.linear_fc{1,2}.weight. groups.expert_parallel is needed when
  /// config.moe.expert_parallel_size > 1; groups.sequence_shards holds the other parts of the
  /// micro-batch's sequences (null: this rank holds them all). With tensor parallelism the layer
  /// runs on this rank's sequence-parallel shard of the tokens; the shared expert is a
  /// tensor-parallel MLP and the experts are split over the tensor-parallel group when
  /// config.moe.expert_tensor_parallel_size > 1.
  moe_layer(parameter_store& store, const std::string& name, const gpt_model_config& config, moe_groups groups = {});
  /// out[rows, hidden] from x[rows, hidden], rows = seq * batch in [seq, batch] order (this
  /// rank's sequence-parallel shard: seq is the shard's positions).
  /// noise_stream: the counter stream of the router's input jitter (--moe-input-jitter-eps).
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x, tensor::tensor_view out,
               int seq, int batch, bool training, std::uint64_t noise_stream = 0);
  /// dx (overwritten) from dout and the forward's input x; accumulates every weight gradient,
  /// the auxiliary losses' with aux_loss_scale().
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view dout, tensor::const_tensor_view x,
                tensor::tensor_view dx);
  /// Megatron's MoEAuxLossAutoScaler.main_loss_backward_scale: the gradient each auxiliary loss
  /// enters the backward with (the loss scale / the number of micro-batches); 1 by default.
  void set_aux_loss_scale(double scale) { aux_loss_scale_ = scale; }
  double aux_loss_scale() const { return aux_loss_scale_; }
  const moe_router& router() const { return router_; }
  moe_router& router() { return router_; }
  /// The dtype the last forward carried the routing probabilities in (to the experts and back).
  tensor::dtype permuted_probs_type() const { return permuted_probs_.type(); }
  const moe_token_dispatcher& dispatcher() const { return dispatcher_; }
  void release();
  /// --delay-wgrad-compute's overlap so far: the dispatch's backward all-to-alls' time on their
  /// thread and the time the backward then still waited for them.
  const transfer_timing& delayed_wgrad_timing() const { return overlap_; }
  /// The state the backward reads from the last forward, its parts' included, into the stash or
  /// back out (activation_stash.hpp). The router's cross-micro-batch counts stay (moe_router::carry).
  void carry(activation_stash& s);

 private:
  /// The local experts on in[rows, hidden] (rows by local expert, counts each), or on every
  /// expert-tensor-parallel rank's rows when the experts are split; out[rows, hidden].
  void experts_forward(const parameter_store& store, tensor::const_tensor_view in,
                       tensor::const_tensor_view in_probs, const std::vector<std::int64_t>& counts,
                       tensor::tensor_view out);
  /// Their backward: dx[rows, hidden] and dprobs[rows] from dout and the forward's input.
  void experts_backward(parameter_store& store, tensor::const_tensor_view dout, tensor::const_tensor_view in,
                        tensor::tensor_view dx, tensor::tensor_view dprobs);
  /// Expert parallelism's backward from the received rows' output gradients din: the experts'
  /// input gradients, then the dispatch's all-to-all taking them back into dpermuted and dprobs,
  /// with --delay-wgrad-compute the experts' weight gradients computed while it runs.
  void experts_backward_and_return(parameter_store& store, tensor::const_tensor_view din, tensor::tensor_view dpermuted,
                                   tensor::tensor_view dprobs);

  /// The routing probabilities' dtype next to activations of `activations`: Megatron's probs
  /// keep the logits' dtype, so --moe-router-dtype fp32 (or fp64) keeps them fp32 in a 16-bit
  /// model (fp64 is narrowed to fp32: mactor's kernels mix 16- and 32-bit operands only).
  tensor::dtype probs_type(tensor::dtype activations) const;
  /// The split experts' partial outputs summed over the expert-tensor-parallel ranks into out,
  /// in the probabilities' dtype as Megatron's alltoall combine reduce-scatters them.
  void sum_expert_shards(tensor::const_tensor_view partial, tensor::tensor_view out, tensor::dtype probs);

  int hidden_, rows_ = 0, full_rows_ = 0;
  bool sequence_parallel_;
  std::optional<tensor::dtype> router_dtype_;  // --moe-router-dtype
  int expert_tensor_parallel_, local_experts_;
  int padding_multiple_;  // --moe-router-padding-for-fp8 (0: none)
  bool delay_wgrad_;      // --delay-wgrad-compute
  transfer_timing overlap_;
  double aux_loss_scale_ = 1.0;
  moe_router router_;
  moe_token_dispatcher dispatcher_;
  moe_experts experts_;
  std::optional<mlp> shared_;  // the shared expert
  std::optional<moe_expert_exchange> exchange_;  // expert parallelism
  std::optional<moe_expert_tensor_exchange> tensor_exchange_;  // experts split over tensor parallelism
  // The split experts' input, probabilities and partial outputs over the whole tensor-parallel
  // group's rows (saved), and their gradients in the backward.
  tensor::tensor gathered_in_, gathered_probs_, gathered_out_, dgathered_out_, dgathered_in_, dgathered_probs_;
  tensor::tensor wide_partial_, wide_out_;  // the partial outputs and their sum in the probabilities' dtype
  std::vector<std::int64_t> identity_;  // rows 0 .. rows-1: adds a [rows, hidden] block in place
  tensor::tensor shared_out_;           // the shared expert's output or input gradient
  tensor::tensor permuted_, permuted_probs_, expert_out_;       // saved
  tensor::tensor dexpert_out_, dpermuted_, dpermuted_probs_;  // backward scratch
  // Expert parallelism: the rows this rank's experts received (saved), their probabilities
  // and outputs; in the backward, their output gradients, input and probability gradients.
  tensor::tensor expert_in_, expert_in_probs_, expert_local_out_;
  tensor::tensor dexpert_in_, dexpert_local_in_, dexpert_local_probs_;
};

}  // namespace mactor::model
