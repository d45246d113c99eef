// Implemented flags whose combinations mactor does not build yet, refused at start with the fix.
#include "config/flag_tables.hpp"

#include <string>

namespace mactor::config::detail {

// Implemented flags whose combination with others mactor does not build yet: the MoE layer has
// its experts whole or split like the dense layers, no router noise with sequence shards, no
// expert biases, and fp8 weights held as bf16 (no --fp8-param-gather).
void moe_combinations(const megatron_args& a, std::vector<std::string>& errors) {
  const auto& m = a.moe;
  if (!m.num_experts || *m.num_experts <= 0) return;
  const auto tp = a.distributed.tensor_model_parallel_size;
  // Megatron's MoELayer raises at the first training step without it.
  if (tp > 1 && !a.training.sequence_parallel)
    errors.push_back("--num-experts with --tensor-model-parallel-size " + std::to_string(tp) +
                     " needs --sequence-parallel (Megatron's MoE layer refuses tensor parallelism without it in "
                     "training); add --sequence-parallel");
  const auto shards = a.distributed.context_parallel_size * tp;
  if (shards != 1 && (m.moe_input_jitter_eps || m.moe_router_force_load_balancing))
    errors.push_back("--num-experts with --context-parallel-size or --tensor-model-parallel-size above 1 and "
                     "--moe-input-jitter-eps or --moe-router-force-load-balancing is recognized but not implemented "
                     "by mactor yet (their noise is drawn by the whole sequence's rows); use one rank per sequence");
  if (a.training.add_bias_linear)
    errors.push_back("--num-experts with biases in the experts is recognized but not implemented by mactor yet; add "
                     "--disable-bias-linear");
  // Megatron fills each expert to capacity with probability-0 tokens chosen by torch.topk among
  // ties: no effect on the numbers, except under fp8, whose scales then see those tokens.
  if (m.moe_pad_expert_input_to_capacity && a.transformer_engine.fp8)
    errors.push_back("--moe-pad-expert-input-to-capacity with --fp8-format is recognized but not implemented by mactor yet "
                     "(the probability-0 tokens that fill each expert to capacity enter the experts' fp8 scales, and "
                     "Megatron picks them in torch.topk's order among ties); drop one of the two");
  if (m.moe_router_padding_for_fp8 && m.moe_token_dispatcher_type == "flex")
    errors.push_back("--moe-router-padding-for-fp8 with --moe-token-dispatcher-type flex is recognized but not implemented "
                     "by mactor yet (DeepEP pads the received tokens after the exchange); use --moe-token-dispatcher-type "
                     "alltoall");
  if (a.transformer_engine.fp8 && a.transformer_engine.fp8_param_gather)
    errors.push_back("--num-experts with --fp8-param-gather is recognized but not implemented by mactor yet (the experts' "
                     "weights held as fp8 over the expert-data-parallel shards); drop --fp8-param-gather");
  if (const auto* list = std::get_if<std::vector<std::int64_t>>(&m.moe_layer_freq))
    if (std::int64_t(list->size()) != a.network_size.num_layers.value_or(0))
      errors.push_back("--moe-layer-freq lists " + std::to_string(list->size()) +
                       " layers; it needs one 0/1 entry per layer (--num-layers=" +
                       std::to_string(a.network_size.num_layers.value_or(0)) + ")");
}

// Multi-latent attention is built without the softmax variants.
void mla_combinations(const megatron_args& a, std::vector<std::string>& errors) {
  if (!a.network_size.multi_latent_attention) return;
  if (a.network_size.softmax_type != "vanilla")
    errors.push_back("--multi-latent-attention with --softmax-type " + a.network_size.softmax_type +
                     " is recognized but not implemented by mactor yet; drop --softmax-type");
}

// Multi-token prediction as built: no fp32 residual stream.
void mtp_combinations(const megatron_args& a, std::vector<std::string>& errors) {
  const auto depths = a.network_size.mtp_num_layers.value_or(0);
  if (depths <= 0) return;
  const auto refuse = [&](const std::string& what, const std::string& fix) {
    errors.push_back("--mtp-num-layers with " + what + " is recognized but not implemented by mactor yet; " + fix);
  };
  if (a.mixed_precision.fp32_residual_connection)
    refuse("--fp32-residual-connection", "drop --fp32-residual-connection");
}

// --fp8-param-gather as built: per-tensor recipes, a 16-bit model.
void fp8_param_gather_combinations(const megatron_args& a, std::vector<std::string>& errors) {
  const auto& te = a.transformer_engine;
  if (!te.fp8_param_gather || !te.fp8) return;
  if (te.fp8_recipe == "mxfp8" || te.fp8_recipe == "blockwise")
    errors.push_back("--fp8-param-gather with --fp8-recipe " + te.fp8_recipe +
                     " is recognized but not implemented by mactor yet (block-scaled fp8 weights); use --fp8-recipe "
                     "delayed or tensorwise, or drop --fp8-param-gather");
  if (a.experimental.main_params_dtype == "fp16" || a.experimental.main_params_dtype == "float16")
    errors.push_back("--fp8-param-gather with --main-params-dtype fp16 is recognized but not implemented by mactor yet "
                     "(TE's FusedAdam casting fp16 masters to fp8 weights); drop one of the two");
  if (!a.mixed_precision.bf16 && !a.mixed_precision.fp16)
    errors.push_back("--fp8-param-gather without --bf16 or --fp16 is recognized but not implemented by mactor yet (an "
                     "fp32 model's values are its main parameters); add --bf16");
}

// FSDP's sharded gradients (Megatron FSDP's optim_grads and optim_grads_params, torch FSDP2) are
// reduce-scattered after each backward of a chunk; what runs on the whole gradient buffer at
// finalize, or needs the whole parameters outside a compute, is not built with them.
void fsdp_combinations(const megatron_args& a, std::vector<std::string>& errors) {
  const auto& d = a.distributed;
  const std::string& s = d.data_parallel_sharding_strategy;
  const bool megatron = d.use_megatron_fsdp && (s == "optim_grads" || s == "optim_grads_params");
  if (!megatron && !d.use_torch_fsdp2) return;
  const std::string flag = d.use_torch_fsdp2 ? "--use-torch-fsdp2" : "--data-parallel-sharding-strategy " + s;
  const auto refuse = [&](bool set, const std::string& other, const std::string& why) {
    if (set)
      errors.push_back(flag + " with " + other + " is recognized but not implemented by mactor yet (" + why +
                       "); drop " + other + " or use --data-parallel-sharding-strategy optim");
  };
  // (--overlap-grad-reduce and --overlap-param-gather are timing only here: the sharded gradients
  // are reduce-scattered after each backward, the parameters gathered before each compute.)
  // Megatron's torch FSDP2 shards over the whole data x context-parallel group whatever the
  // instances; mactor's sharding follows the distributed optimizer's (one instance's part).
  refuse(d.use_torch_fsdp2 && d.num_distributed_optimizer_instances > 1, "--num-distributed-optimizer-instances > 1",
         "torch FSDP2 shards over every data-parallel rank");
  const bool params = d.use_torch_fsdp2 || s == "optim_grads_params";
  if (!params) return;
  refuse(a.transformer_engine.fp8_param_gather, "--fp8-param-gather", "fp8 weights gathered from sharded parameters");
  refuse(a.training.check_weight_hash_across_dp_replicas_interval.has_value(),
         "--check-weight-hash-across-dp-replicas-interval", "each replica holds only its shard of the weights");
  refuse(a.validation.test_mode, "--test-mode", "its check compares whole --qk-layernorm weights across ranks");
  refuse(a.checkpointing.ckpt_convert_format == std::optional<std::string>("torch"), "--ckpt-convert-format torch",
         "Megatron's per-rank torch files hold whole parameters");
}

}  // namespace mactor::config::detail
