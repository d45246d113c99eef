// The layer kinds of a hybrid Mamba model (--is-hybrid-model: --hybrid-override-pattern or the
// --hybrid-*-ratio flags, allocated as config/hybrid_layer_allocation.hpp does) as the cost model
// prices them: Mamba (M), attention-only (*) and MLP-only (-) layers. Their FLOPs and counts per
// chunk are layer_kinds.hpp's (Megatron's hybrid formula, training/flops.cpp hybrid_flops, on a
// one-layer pattern of each kind); here are their parameters, which follow the modules mactor
// builds (model/mamba_mixer.hpp, Megatron's MambaMixer), what each kind keeps for its backward,
// and the Mamba layers' context-parallel all-to-alls (model/mamba_context_parallel.hpp, Megatron's
// MambaContextParallel).
#pragma once

#include <string>
#include <vector>

#include "config/hybrid_layer_allocation.hpp"
#include "config/megatron_args.hpp"
#include "simulate/system_spec.hpp"

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

/// Bytes one microbatch keeps for one layer's backward on one rank, of its positions (the
/// sequence / cp under context parallelism; a Mamba layer's whole-sequence buffers of heads / cp
/// heads are counted at that size, though B and C are larger where they are repeated, below). Attention-only and MLP-only:
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

/// One Mamba layer's context-parallel exchanges in one direction, as mactor's mixer runs them
/// (model/mamba_context_parallel.hpp): the bytes one rank sends into each all-to-all over the
/// context-parallel group, in order x, B, C, dt (in_proj's columns from the rank's positions to
/// the whole sequence of heads / cp heads) and y (back to the positions); the backward moves the
/// same on the gradients (dy to heads; dx, dB, dC, ddt back). Each is the rank's positions x the
/// tensor-parallel rank's columns: d_inner / tp for x and y, heads / tp for dt, and for B and C
/// groups / tp x state, each group repeated cp / (groups / tp) times where a tensor-parallel rank
/// holds fewer groups than cp. z stays local (mactor gates y on the rank's own rows), where
/// Megatron also moves z to heads and back. Empty without context parallelism.
std::vector<double> mamba_context_parallel_exchange_bytes(const config::megatron_args& a);
/// Why Megatron's MambaContextParallel (and mactor's mixer) would refuse the layout, or empty:
/// the heads per tensor-parallel rank must divide by cp, and its groups divide cp or by it.
std::string mamba_context_parallel_mismatch(const config::megatron_args& a);
/// Their time: one all-to-all each (collectives.hpp, over the context-parallel group: cp ranks at
/// stride tp), never overlapped with compute.
double mamba_context_parallel_exchange_seconds(const config::megatron_args& a, const system_spec& system);

}  // namespace mactor::simulate
