// What --spec selects, and the model each program builds with it: pretrain_gpt builds Megatron's
// GPTModel (no --spec, or one naming a GPT layer spec mactor's layers follow); pretrain_mamba
// builds MambaModel, which needs --spec megatron.core.models.mamba.mamba_layer_specs
// mamba_stack_spec, with the layers --hybrid-attention-ratio, --hybrid-mlp-ratio or
// --hybrid-override-pattern allocate.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::config {

/// Whether the args select Megatron's Mamba stack (--spec ... mamba_stack_spec).
bool selects_mamba_stack(const megatron_args& args);

/// Whether --qk-l2-norm puts Megatron's L2Norm in the attention's q_layernorm / k_layernorm
/// slots: gpt_builders passes args.qk_l2_norm to the Transformer Engine layer spec and to the MoE
/// decoder block spec (either --transformer-impl), not to the local layer spec nor an imported
/// --spec, and the Mamba stack never takes it.
bool applies_qk_l2_norm(const megatron_args& args);
/// Whether --use-te-activation-func reaches Transformer Engine's activation module: the MLPs of
/// Megatron-Core's TE specs take it (backend.activation_func()); the local spec and an imported
/// --spec give none, and the MLP then applies the config's activation alone.
bool uses_te_activation_module(const megatron_args& args);

/// The hybrid model's layer kinds as one character each ('M', '*', '-'), from the ratios or the
/// pattern (config::allocate_hybrid_layers). Throws std::invalid_argument naming the flag.
std::string hybrid_layer_pattern(const megatron_args& args);

/// Every problem with the model `program` ("pretrain_gpt" or "pretrain_mamba"; other programs
/// take either model's spec) would build from these args: an unknown --spec (with the known ones), the Mamba stack under pretrain_gpt, no
/// --spec under pretrain_mamba, a bad allocation, and what mactor's hybrid model does not
/// build yet (each naming the flag and the fix). Empty when the model can be built.
std::vector<std::string> model_spec_errors(std::string_view program, const megatron_args& args);

}  // namespace mactor::config
