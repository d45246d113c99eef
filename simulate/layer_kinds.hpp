// The kinds of layer a model mixes, as the cost model prices them: dense and MoE layers (from
// --moe-layer-freq), standard or multi-latent attention, multi-token prediction depths, and a
// hybrid model's Mamba, attention-only and MLP-only layers (their parameters and activations in
// hybrid_layers.hpp). Each kind's forward FLOPs come from Megatron's own formula, evaluated on
// configs that isolate it, so a model's layers add up to num_floating_point_operations exactly; parameters
// follow the modules Megatron-Core builds; the expert-parallel token exchange and the routed
// tokens' activations assume balanced routing (every expert receives topk x tokens / experts).
#pragma once

#include <cstdint>
#include <vector>

#include "config/megatron_args.hpp"
#include "simulate/system_spec.hpp"

namespace mactor::simulate {

/// Forward FLOPs of one microbatch over the whole (unsharded) model, by kind. A hybrid model
/// (--is-hybrid-model) has only the Mamba, attention-only and MLP-only kinds and the logits: each
/// Megatron's hybrid formula on a one-layer pattern of that kind (`M`, `*`, `-`) less the empty one.
struct layer_kind_flops {
  double dense_layer = 0;  ///< one layer with a dense MLP
  double moe_layer = 0;    ///< one layer with the MoE MLP (routed experts and the shared expert)
  double mtp_depth = 0;    ///< one multi-token prediction depth: its layer, norms, eh_proj, logits
  double mamba_layer = 0;      ///< hybrid: one Mamba layer
  double attention_layer = 0;  ///< hybrid: one attention-only layer
  double mlp_layer = 0;        ///< hybrid: one MLP-only layer
  double logits = 0;       ///< the output layer
};
layer_kind_flops split_layer_flops(const config::megatron_args& a, std::int64_t padded_vocab);

/// How many of decoder layers [begin, end) (0-based, global) are of each kind: dense and MoE
/// (--moe-layer-freq's pattern, all dense without --num-experts), or for a hybrid model Mamba,
/// attention-only and MLP-only (config/hybrid_layer_allocation.hpp).
struct layer_kind_counts {
  int dense = 0, moe = 0, mamba = 0, attention = 0, mlp = 0;
};
layer_kind_counts layer_kinds_in(const config::megatron_args& a, int begin, int end);

/// Whether each decoder layer (0-based, global) is a MoE layer: --moe-layer-freq's pattern, all
/// false without --num-experts.
std::vector<bool> moe_layers(const config::megatron_args& a);
/// Whether an MTP depth's layer is a MoE layer (it takes the decoder's last layer's kind).
bool mtp_depth_is_moe(const config::megatron_args& a);

/// Bytes of one activation element: 2 under --bf16 or --fp16, else 4.
double activation_element_bytes(const config::megatron_args& a);

/// The forward FLOPs of the attention core (scores and their product with the values, causal
/// half) per microbatch over the whole model: what has no weight gradient.
double core_attention_flops(const config::megatron_args& a);

/// Parameters of one layer on one rank (tensor-parallel and expert-parallel shards): the
/// attention (standard, or MLA with its replicated down projections), two norms, and the dense
/// MLP or the MoE's router, shared expert and this rank's experts.
double attention_parameters(const config::megatron_args& a);
double dense_layer_parameters(const config::megatron_args& a);
double moe_layer_parameters(const config::megatron_args& a);
/// The part of moe_layer_parameters that are experts (reduced over the expert-data-parallel group).
double local_expert_parameters(const config::megatron_args& a);

/// The expert-data-parallel group's size (the ranks holding the same experts): Megatron's
/// world / (pp x ep x etp).
int expert_data_parallel_size(const config::megatron_args& a);

/// One MoE layer's token exchange in one direction (the forward, or the backward's gradients):
/// the dispatch and combine all-to-alls over the expert-parallel group, with an expert-tensor-
/// parallel size above one the all-gather and reduce-scatter of the routed rows too. Seconds,
/// never overlapped with compute.
double moe_exchange_seconds(const config::megatron_args& a, const system_spec& system);

/// --delay-wgrad-compute with expert parallelism: the part of moe_exchange_seconds' backward the
/// experts' weight-gradient GEMMs hide (the dispatch's backward all-to-all runs while they do, as
/// model::moe_layer runs it): min(that all-to-all, the experts' weight-gradient time at `rate`
/// FLOP/s). 0 without the flag, without expert parallelism, or under a schedule that splits the
/// backward (its W pass takes the weight gradients).
double moe_delayed_wgrad_hidden_seconds(const config::megatron_args& a, const system_spec& system, double rate);

/// What one microbatch keeps for the backward of a MoE layer's routed experts, per rank: each
/// routed row's input, fc1 output and activation output (the shared expert is counted as a dense
/// MLP of its width by the cost model).
double moe_mlp_activation_bytes(const config::megatron_args& a);

}  // namespace mactor::simulate
