// The layer kinds of a hybrid Mamba model (--is-hybrid-model: --hybrid-override-pattern or the
// --hybrid-*-ratio flags, allocated as config/hybrid_layer_allocation.hpp does) as the cost model
// prices them: Mamba (M), attention-only (*) and MLP-only (-) layers. Their FLOPs and counts per
// chunk are layer_kinds.hpp's (Megatron's hybrid formula, training/flops.cpp hybrid_flops, on a
// one-layer pattern of each kind); here are their parameters, which follow the modules mactor
// builds (model/mamba_mixer.hpp, Megatron's MambaMixer), and what each kind keeps for its backward.
#pragma once

#include <vector>

#include "config/hybrid_layer_allocation.hpp"
#include "config/megatron_args.hpp"

namespace mactor::simulate {

/// Whether the simulator prices the model as hybrid (--is-hybrid-model: Megatron's FLOPs formula
/// then takes its hybrid branch).
bool is_hybrid(const config::megatron_args& a);

/// Each decoder layer's kind (num_layers of them).
std::vector<config::hybrid_layer> hybrid_layers(const config::megatron_args& a);

/// Parameters of one layer on one tensor-parallel rank. Mamba: the layer's norm (fused into
/// in_proj, on every rank), in_proj h -> 2 d_inner + 2 groups x state + heads, conv1d (weight
/// d_conv = 4 wide and bias) over d_inner + 2 groups x state channels, dt_bias, A_log and D per
/// head, the gated RMSNorm over d_inner and out_proj d_inner -> h, all but the layer's norm split
/// over the tensor-parallel ranks. Attention-only: the attention and its norm; MLP-only: the MLP
/// and its norm.
double mamba_layer_parameters(const config::megatron_args& a);
double attention_only_layer_parameters(const config::megatron_args& a);
double mlp_only_layer_parameters(const config::megatron_args& a);

/// Bytes one microbatch keeps for one layer's backward on one rank. Attention-only and MLP-only:
/// the attention block's and the MLP block's parts of Korthikanti's Table 2 (attention 11 sbh and
/// its norm 2 sbh, MLP 3 sbh + 4 ffn/h sbh and its norm 2 sbh; with sequence parallelism all / tp,
/// without it the inputs, norms and dropout masks whole and the rest / tp; the scores 5 a s^2 b /
/// tp when the backend keeps them). Mamba, in the activation dtype: the layer's input and its
/// norm's output (h each, / tp with sequence parallelism), and / tp: in_proj's output
/// (2 d_inner + 2 groups x state + heads), the conv's output (d_inner + 2 groups x state), the
/// scan's output and the gated norm's output (d_inner each). The residual dropout mask and the
/// scan's per-chunk states are not counted.
double mamba_activation_bytes(const config::megatron_args& a);
double attention_only_activation_bytes(const config::megatron_args& a);
double mlp_only_activation_bytes(const config::megatron_args& a);

}  // namespace mactor::simulate
