// What a GPT model's mixture-of-experts layers are (Megatron's --num-experts and --moe-* flags
// that change the numbers) and this rank's share of the experts.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::model {

/// --moe-router-load-balancing-type: the auxiliary loss added to the router's logits' gradient.
/// sinkhorn: Megatron's S-BASE routing (no auxiliary loss; balanced choices in training).
/// global_aux_loss: aux_loss with the tokens per expert of every data-, tensor- and
/// context-parallel rank, averaged over the global batch's micro-batches so far.
enum class moe_load_balancing { aux_loss, seq_aux_loss, global_aux_loss, sinkhorn, none };
/// --moe-router-score-function.
enum class moe_score_function { softmax, sigmoid };

struct moe_settings {
  int num_experts = 0;  // --num-experts; 0: a dense model
  /// --moe-layer-freq: an int N makes layers 0, N, 2N, ... (0-based) MoE layers; a list has one
  /// 0/1 entry per layer (1: MoE).
  int layer_freq_every = 1;
  std::vector<int> layer_freq_list;
  int ffn_hidden_size = 0;  // --moe-ffn-hidden-size (0: the model's ffn_hidden_size)
  /// --moe-shared-expert-intermediate-size: a shared expert MLP of that width every token goes
  /// through, added to the routed experts' output (0: none).
  int shared_expert_intermediate_size = 0;
  int router_topk = 2;      // --moe-router-topk
  bool router_pre_softmax = false;  // --moe-router-pre-softmax: softmax over all, then top-k
  std::optional<double> router_topk_scaling_factor;  // --moe-router-topk-scaling-factor
  moe_score_function score_function = moe_score_function::softmax;
  int router_num_groups = 0;  // --moe-router-num-groups (0: no groups)
  int router_group_topk = 0;  // --moe-router-group-topk (0: not group-limited)
  moe_load_balancing load_balancing = moe_load_balancing::aux_loss;
  double aux_loss_coeff = 0.0;         // --moe-aux-loss-coeff (0: no auxiliary loss)
  /// The list form (--moe-router-load-balancing-type aux_loss seq_aux_loss --moe-aux-loss-coeff
  /// a b): each type with its own coefficient; load_balancing and aux_loss_coeff then unused.
  std::vector<std::pair<moe_load_balancing, double>> load_balancing_list;
  /// The coefficient of the aux_loss or seq_aux_loss term (0: that loss is off).
  double balancing_coeff(moe_load_balancing type) const {
    if (load_balancing_list.empty()) return load_balancing == type ? aux_loss_coeff : 0.0;
    for (const auto& [t, c] : load_balancing_list)
      if (t == type) return c;
    return 0.0;
  }
  std::optional<double> z_loss_coeff;  // --moe-z-loss-coeff
  /// --moe-grouped-gemm: the experts' weights named as Megatron's TEGroupedMLP names them
  /// (experts.linear_fc1.weight<i>) rather than SequentialMLP's (experts.local_experts.<i>...).
  bool grouped_gemm = false;
  /// --moe-grouped-gemm with --moe-use-legacy-grouped-gemm: Megatron's legacy GroupedMLP (grouped_gemm's
  /// gmm over weight1/weight2 in the model's 16-bit dtype). Its sharded state dict names each expert as
  /// SequentialMLP does (grouped_gemm stays false), it registers all fc1 before all fc2, its GEMMs never
  /// run in fp8, and its gated unit is silu(gate) * up without --activation-func-clamp-value or
  /// --glu-linear-offset.
  bool legacy_grouped_gemm = false;
  /// --calculate-per-token-loss: the auxiliary losses are multiplied by the local token count,
  /// as Megatron's router does, since the main loss is then not averaged per micro-batch.
  bool per_token_loss = false;

  /// --moe-expert-capacity-factor: each expert keeps at most ceil(tokens * topk / experts *
  /// factor) of its routed tokens, chosen by --moe-token-drop-policy (probs: the highest
  /// probabilities; position: the first tokens); the others are dropped.
  std::optional<double> expert_capacity_factor;
  /// --moe-router-enable-expert-bias (sigmoid scores): a per-expert fp32 bias added to the
  /// scores for choosing the top k only (the probabilities stay unbiased), moved by
  /// --moe-router-bias-update-rate towards balance after every global batch (aux-loss-free
  /// load balancing, DeepSeek-V3).
  bool enable_expert_bias = false;
  /// --moe-router-dtype fp32|fp64: the router's GEMM (input and weight widened) and its
  /// gradients in that dtype instead of the activations' (Megatron's router_gating_linear).
  std::optional<tensor::dtype> router_dtype;
  double bias_update_rate = 1e-3;
  bool drop_by_position = false;  // --moe-token-drop-policy position
  /// --moe-apply-probs-on-input (top-1 only): the experts multiply the probability onto their
  /// input rows instead of onto the activation's output.
  bool apply_probs_on_input = false;
  /// --moe-input-jitter-eps: the router's input multiplied by uniform(1 - eps, 1 + eps) noise,
  /// drawn per element from a generator seeded by `seed` (see moe_router).
  std::optional<double> input_jitter_eps;
  /// --moe-router-force-load-balancing (benchmarking): the router's logits replaced by standard
  /// normal draws (see moe_router), their gradient passed straight to the gating GEMM.
  bool force_load_balancing = false;
  /// --moe-router-padding-for-fp8: each expert's rows padded to a multiple of this (16; 32
  /// under mxfp8, Megatron's get_fp8_align_size) with tokens not routed to it, of probability 0
  /// (Megatron's pad_routing_map in the alltoall dispatcher, on each rank's own tokens): their
  /// outputs add nothing, but the experts' fp8 GEMMs see them (amaxes, scales) and the
  /// all-to-all moves them. 0: no padding.
  int router_padding_multiple = 0;
  /// --delay-wgrad-compute (with --overlap-moe-expert-parallel-comm): in the backward the
  /// experts' weight-gradient GEMMs run while the dispatch's all-to-all carries their input
  /// gradients back (moe_layer), as Megatron delays them behind that all-to-all.
  bool delay_wgrad_compute = false;

  /// --expert-model-parallel-size: the experts split into that many equal blocks, one per
  /// expert-parallel rank; this rank holds block expert_parallel_rank and exchanges tokens
  /// with the others (an all-to-all over the expert-parallel group).
  int expert_parallel_size = 1;
  int expert_parallel_rank = 0;
  /// --expert-tensor-parallel-size: 1 (each expert whole on its rank) or more (each expert split
  /// over the expert-tensor-parallel group, the tensor-parallel one when the sizes agree, whose
  /// ranks then all run every token any of them received for their experts:
  /// moe_expert_tensor_exchange); this rank's place in that group.
  int expert_tensor_parallel_size = 1;
  int expert_tensor_parallel_rank = 0;
  int local_experts() const { return num_experts / expert_parallel_size; }
  int first_local_expert() const { return expert_parallel_rank * local_experts(); }

  bool enabled() const { return num_experts > 0; }
  /// Whether global layer `layer` (0-based) is a MoE layer.
  bool layer_is_moe(int layer) const {
    if (!enabled()) return false;
    if (!layer_freq_list.empty())
      return layer < int(layer_freq_list.size()) && layer_freq_list[layer] == 1;
    return layer_freq_every > 0 && layer % layer_freq_every == 0;
  }
};

}  // namespace mactor::model
