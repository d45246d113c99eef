// The kinds of transformer layer a model mixes, as the cost model prices them: dense and MoE
// layers (from --moe-layer-freq), standard or multi-latent attention, and multi-token prediction
// depths. Each kind's forward FLOPs come from Megatron's own formula, evaluated on configs that
// isolate it, so a model's layers add up to num_floating_point_operations exactly; parameters
// follow the modules Megatron-Core builds; the expert-parallel token exchange and the routed
// tokens' activations assume balanced routing (every expert receives topk x tokens / experts).
#pragma once

#include <cstdint>
#include <vector>

#include "config/megatron_args.hpp"
#include "simulate/system_spec.hpp"

namespace mactor::simulate {

/// Forward FLOPs of one microbatch over the whole (unsharded) model, by kind.
struct layer_kind_flops {
  double dense_layer = 0;  ///< one layer with a dense MLP
  double moe_layer = 0;    ///< one layer with the MoE MLP (routed experts and the shared expert)
  double mtp_depth = 0;    ///< one multi-token prediction depth: its layer, norms, eh_proj, logits
  double logits = 0;       ///< the output layer
};
layer_kind_flops split_layer_flops(const config::megatron_args& a, std::int64_t padded_vocab);

/// Whether each decoder layer (0-based, global) is a MoE layer: --moe-layer-freq's pattern, all
/// false without --num-experts.
std::vector<bool> moe_layers(const config::megatron_args& a);
/// How many of layers [begin, end) are MoE layers.
int moe_layers_in(const config::megatron_args& a, int begin, int end);
/// Whether an MTP depth's layer is a MoE layer (it takes the decoder's last layer's kind).
bool mtp_depth_is_moe(const config::megatron_args& a);

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

/// What one microbatch keeps for the backward of a MoE layer's routed experts, per rank: each
/// routed row's input, fc1 output and activation output (the shared expert is counted as a dense
/// MLP of its width by the cost model).
double moe_mlp_activation_bytes(const config::megatron_args& a);

}  // namespace mactor::simulate
