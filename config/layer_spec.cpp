// --spec and the model each program builds; the hybrid model's allocation and its limits.
#include "config/layer_spec.hpp"

#include <stdexcept>

#include "config/hybrid_layer_allocation.hpp"

namespace mactor::config {
namespace {

const std::vector<std::string> mamba_stack_spec = {"megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"};
// The GPT layer specs mactor's layers follow (Megatron-Core's local and Transformer Engine specs
// compute the same model; mactor names parameters as the local spec does).
const std::vector<std::vector<std::string>> gpt_specs = {
    {"local"},
    {"megatron.core.models.gpt.gpt_layer_specs", "get_gpt_layer_local_spec"},
    {"megatron.core.models.gpt.gpt_layer_specs", "get_gpt_layer_with_transformer_engine_spec"},
};

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string known_specs(std::string_view program) {
  const std::string mamba = "'" + joined(mamba_stack_spec) + "'";
  if (program == "pretrain_mamba") return mamba;
  std::string out;
  for (const auto& s : gpt_specs) out += (out.empty() ? "'" : ", '") + joined(s) + "'";
  return program == "pretrain_gpt" ? out : out + ", " + mamba;
}

// What the hybrid stack does not build yet, or what Megatron's MambaStack refuses.
void hybrid_limits(const megatron_args& a, std::vector<std::string>& errors) {
  const auto refuse = [&](const std::string& what, const std::string& fix) {
    errors.push_back("the hybrid Mamba model (--spec " + joined(mamba_stack_spec) + ") with " + what +
                     " is not built by mactor yet; " + fix);
  };
  const auto& d = a.distributed;
  if (a.network_size.mtp_num_layers.value_or(0) > 0) refuse("--mtp-num-layers", "drop --mtp-num-layers");
  if (a.moe.num_experts.value_or(0) > 0) refuse("--num-experts (MoE layers)", "drop --num-experts");
  if (a.network_size.multi_latent_attention) refuse("--multi-latent-attention", "drop --multi-latent-attention");
  if (a.vision.qk_layernorm) refuse("--qk-layernorm", "drop --qk-layernorm");
  if (a.mixed_precision.fp32_residual_connection)
    refuse("--fp32-residual-connection", "drop --fp32-residual-connection");
  // MambaStack gives each pipeline stage num_layers // pp layers and has no virtual stages.
  if (d.num_layers_per_virtual_pipeline_stage || d.num_virtual_stages_per_pipeline_rank)
    errors.push_back("The Mamba hybrid model does not currently support virtual/interleaved pipeline parallelism: "
                     "drop --num-layers-per-virtual-pipeline-stage / --num-virtual-stages-per-pipeline-rank");
  if (d.decoder_first_pipeline_num_layers || d.decoder_last_pipeline_num_layers || d.pipeline_model_parallel_layout ||
      d.account_for_embedding_in_pipeline_split || d.account_for_loss_in_pipeline_split)
    errors.push_back("the hybrid Mamba model splits its layers evenly over the pipeline stages (Megatron's MambaStack "
                     "ignores uneven splits): drop --decoder-first/last-pipeline-num-layers, "
                     "--pipeline-model-parallel-layout and --account-for-*-in-pipeline-split");
  const auto layers = a.network_size.num_layers.value_or(0);
  if (d.pipeline_model_parallel_size > 1 && layers % d.pipeline_model_parallel_size != 0)
    errors.push_back("--num-layers " + std::to_string(layers) + " must be a multiple of --pipeline-model-parallel-size " +
                     std::to_string(d.pipeline_model_parallel_size) + " for the hybrid Mamba model");
  const auto heads = a.experimental.mamba_num_heads.value_or(
      a.experimental.mamba_head_dim > 0 ? 2 * a.network_size.hidden_size.value_or(0) / a.experimental.mamba_head_dim : 0);
  if (a.experimental.mamba_state_dim <= 0 || a.experimental.mamba_head_dim <= 0 || a.experimental.mamba_num_groups <= 0)
    errors.push_back("--mamba-state-dim, --mamba-head-dim and --mamba-num-groups must be positive");
  else if (heads <= 0 || heads % a.experimental.mamba_num_groups != 0)
    errors.push_back("nheads must be evenly divisible by ngroups: the Mamba heads (--mamba-num-heads, or 2 * --hidden-size / "
                     "--mamba-head-dim = " + std::to_string(heads) + ") and --mamba-num-groups " +
                     std::to_string(a.experimental.mamba_num_groups));
  else if (heads % d.tensor_model_parallel_size != 0 || a.experimental.mamba_num_groups % d.tensor_model_parallel_size != 0)
    errors.push_back("the Mamba heads (" + std::to_string(heads) + ") and --mamba-num-groups " +
                     std::to_string(a.experimental.mamba_num_groups) + " must be multiples of --tensor-model-parallel-size " +
                     std::to_string(d.tensor_model_parallel_size) + " (Megatron's mixer splits both over the ranks)");
  else if (const int width = 2 * heads * a.experimental.mamba_head_dim +
                             2 * a.experimental.mamba_num_groups * a.experimental.mamba_state_dim + heads;
           a.transformer_engine.fp8 && width % 16 != 0)
    errors.push_back("For FP8, the innermost dimension of the Mamba layer input projection output tensor must be a "
                     "multiple of 16: 2 * d_inner + 2 * --mamba-num-groups * --mamba-state-dim + heads = " +
                     std::to_string(width));
  if (const int cp = d.context_parallel_size; cp > 1 && heads > 0 && a.experimental.mamba_num_groups > 0 &&
                                              heads % d.tensor_model_parallel_size == 0 &&
                                              a.experimental.mamba_num_groups % d.tensor_model_parallel_size == 0) {
    // MambaContextParallel: the scan's heads split over the context-parallel ranks, each group
    // on one rank or replicated over consecutive ones.
    const int local_heads = heads / d.tensor_model_parallel_size;
    const int local_groups = a.experimental.mamba_num_groups / d.tensor_model_parallel_size;
    if (local_heads % cp != 0)
      errors.push_back("nheads must be evenly divisible by tp_size * cp_size: the Mamba heads (" + std::to_string(heads) +
                       ") over --tensor-model-parallel-size " + std::to_string(d.tensor_model_parallel_size) +
                       " x --context-parallel-size " + std::to_string(cp));
    else if (local_groups < cp ? cp % local_groups != 0 : local_groups % cp != 0)
      errors.push_back(std::string(local_groups < cp ? "cp_size must be evenly divisible by ngroups/tp_size"
                                                     : "ngroups must be evenly divisible by tp_size * cp_size") +
                       ": --mamba-num-groups " + std::to_string(a.experimental.mamba_num_groups) +
                       " over --tensor-model-parallel-size " + std::to_string(d.tensor_model_parallel_size) +
                       " and --context-parallel-size " + std::to_string(cp));
  }
}

}  // namespace

bool selects_mamba_stack(const megatron_args& a) {
  return a.experimental.spec && *a.experimental.spec == mamba_stack_spec;
}

std::string hybrid_layer_pattern(const megatron_args& a) {
  hybrid_allocation_settings s;
  s.num_layers = int(a.network_size.num_layers.value_or(0));
  s.attention_ratio = a.experimental.hybrid_attention_ratio;
  s.mlp_ratio = a.experimental.hybrid_mlp_ratio;
  s.pattern = a.experimental.hybrid_override_pattern;
  return to_string(allocate_hybrid_layers(s));
}

bool applies_qk_l2_norm(const megatron_args& a) {
  if (!a.vision.qk_l2_norm || a.experimental.spec) return false;  // --spec: the imported spec as it is
  if (a.moe.num_experts.value_or(0) > 0) return true;  // get_gpt_decoder_block_spec, either impl
  return !a.heterogeneous.heterogeneous_layers_config_path && a.transformer_engine.transformer_impl == "transformer_engine";
}

bool uses_te_activation_module(const megatron_args& a) {
  return a.training.use_te_activation_func && !a.experimental.spec && !a.heterogeneous.heterogeneous_layers_config_path &&
         a.transformer_engine.transformer_impl == "transformer_engine";
}

std::vector<std::string> model_spec_errors(std::string_view program, const megatron_args& a) {
  std::vector<std::string> errors;
  const bool mamba_program = program == "pretrain_mamba";
  const auto& spec = a.experimental.spec;
  if (mamba_program && !spec) {
    errors.push_back("You must provide a valid Mamba layer spec via --spec: --spec " + joined(mamba_stack_spec));
    return errors;
  }
  if (!spec) return errors;
  // Other programs taking the training flags (mactor schedule, the benches) take either model.
  const bool gpt_program = program == "pretrain_gpt";
  bool known = !gpt_program && *spec == mamba_stack_spec;
  for (const auto& s : gpt_specs) known = known || (!mamba_program && *spec == s);
  if (!known) {
    const std::string hint = !mamba_program && *spec == mamba_stack_spec ? " (the Mamba stack builds MambaModel: run pretrain_mamba)" : "";
    errors.push_back("--spec '" + joined(*spec) + "' is not a spec " + std::string(program) + " builds in mactor" + hint +
                     "; known: " + known_specs(program));
    return errors;
  }
  if (*spec != mamba_stack_spec) return errors;
  try {
    hybrid_layer_pattern(a);
  } catch (const std::invalid_argument& e) {
    errors.push_back(e.what());
  }
  hybrid_limits(a, errors);
  return errors;
}

}  // namespace mactor::config
