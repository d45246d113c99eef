// The TransformerConfig / ModelParallelConfig __post_init__ rules (82-117 of shared/megatron/validation.md),
// checked on the command line so that every problem is reported before anything starts.
#include <algorithm>

#include "config/layer_spec.hpp"
#include "config/pipeline_split.hpp"
#include "config/validation_context.hpp"

namespace mactor::config::detail {
namespace {

void heads_and_groups(validation_context& c) {  // rules 82, 86, 95, 96
  const auto& n = c.a.network_size;
  const std::int64_t tp = c.a.distributed.tensor_model_parallel_size;
  if (n.multi_latent_attention && c.a.heterogeneous.heterogeneous_layers_config_path)
    c.error("--multi-latent-attention cannot be combined with --heterogeneous-layers-config-path");
  if (n.multi_latent_attention && n.group_query_attention)  // Megatron asserts it counting FLOPs
    c.error("--multi-latent-attention cannot be combined with --group-query-attention (MLA has no query groups); "
            "drop --group-query-attention");
  if (!n.multi_latent_attention && c.a.training.rope_type)
    c.require(*c.a.training.rope_type == "rope", "--rope-type " + *c.a.training.rope_type + " needs --multi-latent-attention");
  if (n.num_attention_heads && tp > 0)
    c.require(*n.num_attention_heads % tp == 0,
              "--num-attention-heads=" + show(*n.num_attention_heads) + " is not divisible by --tensor-model-parallel-size=" +
                  show(tp) + "\n  each tensor-parallel rank must hold whole heads; try " + divisors_text(*n.num_attention_heads));
  const std::int64_t groups = effective_query_groups(c.a);
  if (n.group_query_attention && n.num_attention_heads)
    c.require(groups > 0 && *n.num_attention_heads % groups == 0,
              "--num-attention-heads=" + show(*n.num_attention_heads) + " is not divisible by --num-query-groups=" + show(groups) +
                  "; try " + divisors_text(*n.num_attention_heads));
  if (n.group_query_attention && tp > 0)
    c.require(groups % tp == 0, "--num-query-groups=" + show(groups) + " is not divisible by --tensor-model-parallel-size=" +
                                    show(tp) + "; try " + divisors_text(groups));
}

void model_parallel_config(validation_context& c) {  // rules 88-93
  auto& d = c.a.distributed;
  if (d.defer_embedding_wgrad_compute) {
    c.require(d.pipeline_model_parallel_size > 1, "--defer-embedding-wgrad-compute needs --pipeline-model-parallel-size > 1");
    c.require(c.a.training.gradient_accumulation_fusion, "--defer-embedding-wgrad-compute needs gradient accumulation fusion");
    c.require(d.wgrad_deferral_limit >= 0, "--wgrad-deferral-limit must be >= 0");
  }
  if (c.a.moe.expert_model_parallel_size > 1 && d.tensor_model_parallel_size > 1 && !c.a.training.sequence_parallel)
    c.warn("When using expert parallelism and tensor parallelism, sequence parallelism must be used (add --sequence-parallel)");
  if (!d.microbatch_group_size_per_vp_stage) d.microbatch_group_size_per_vp_stage = d.pipeline_model_parallel_size;
  if (d.overlap_p2p_comm_warmup_flush)
    c.require(d.overlap_p2p_comm, "--overlap-p2p-communication-warmup-flush needs p2p overlap, which only the interleaved "
                                  "schedule uses (it was turned off here)");
}

void low_precision(validation_context& c) {  // rules 97, 98
  const auto& te = c.a.transformer_engine;
  if (te.fp8 && te.first_last_layers_bf16) {
    c.require(te.fp8_recipe != "delayed", "--first-last-layers-bf16 is not supported with --fp8-recipe delayed; "
                                          "use --fp8-recipe tensorwise, mxfp8 or blockwise");
    const std::int64_t per_stage = c.a.network_size.num_layers.value_or(0) / std::max<std::int64_t>(1, c.a.distributed.pipeline_model_parallel_size);
    for (auto [name, v] : {std::pair{"--num-layers-at-start-in-bf16", te.num_layers_at_start_in_bf16},
                           {"--num-layers-at-end-in-bf16", te.num_layers_at_end_in_bf16}})
      c.require(v >= 0 && v <= per_stage, std::string(name) + "=" + show(v) + " must be in [0, " + show(per_stage) +
                                               "] (--num-layers // --pipeline-model-parallel-size)");
  }
  if (te.fp8_param_gather) c.require(te.fp8.has_value(), "--fp8-param-gather needs --fp8-format");
}

void moe_rules(validation_context& c) {  // rules 99-101, 111, 112, 114
  auto& m = c.a.moe;
  if (m.delay_wgrad_compute) {  // TransformerConfig.__post_init__, with or without experts
    c.require(m.overlap_moe_expert_parallel_comm,
              "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute; add "
              "--overlap-moe-expert-parallel-comm");
    c.require(!m.moe_use_legacy_grouped_gemm,
              "delay_wgrad_compute is not supported with legacy groupedgemm implementation; drop --moe-use-legacy-grouped-gemm");
  }
  if (m.num_experts && m.moe_grouped_gemm && m.moe_use_legacy_grouped_gemm) {  // GroupedMLP.__init__
    c.warn("The legacy GroupedMLP will be deprecated in Megatron-Core v0.12.0. Please update the TransformerEngine to "
           "version>=1.7.0 and use TEGroupedMLP.");  // as TESpecProvider.grouped_mlp_modules warns
    c.require(!c.a.network_size.quick_geglu,
              "Activation function must be silu or gelu when using GroupedMLP (the legacy grouped GEMM's gated unit); "
              "drop --quick-geglu or --moe-use-legacy-grouped-gemm");
  }
  if (m.moe_router_padding_for_fp8) {  // TransformerConfig.__post_init__, with or without experts
    c.require(c.a.transformer_engine.fp8.has_value(),
              "fp8 must be specified when moe_router_padding_for_fp8 is True; add --fp8-format or drop "
              "--moe-router-padding-for-fp8");
    c.require(m.moe_token_dispatcher_type != "allgather" && m.moe_token_dispatcher_type != "alltoall_seq",
              "allgather and alltoall_seq dispatcher does not support moe_router_padding_for_fp8; use "
              "--moe-token-dispatcher-type alltoall");
  }
  if (m.expert_model_parallel_size > 1 && !m.num_experts) return;  // reported by validate_args
  if (!m.num_experts && c.a.moe.moe_ffn_hidden_size && c.a.moe.moe_ffn_hidden_size != c.a.network_size.ffn_hidden_size)
    c.error("--moe-ffn-hidden-size needs --num-experts");
  if (!m.num_experts) return;
  c.require(*m.num_experts > 0, "--num-experts must be > 0");
  // Megatron's router fails in torch.topk at the first forward; refused up front here.
  c.require(m.moe_router_topk >= 1 && m.moe_router_topk <= *m.num_experts,
            "--moe-router-topk=" + show(m.moe_router_topk) + " must lie in [1, --num-experts=" + show(*m.num_experts) +
                "]; each token picks that many distinct experts");
  if (m.moe_enable_deepep) c.require(m.moe_token_dispatcher_type == "flex", "--moe-enable-deepep needs --moe-token-dispatcher-type flex");
  if (m.moe_token_dispatcher_type == "flex") {
    c.require(!m.moe_pad_expert_input_to_capacity, "--moe-pad-expert-input-to-capacity is not supported with the flex dispatcher");
    // MoEFlexTokenDispatcher.__init__: DeepEP is its one backend, over the expert-TP x EP group.
    c.require(m.moe_enable_deepep, "DeepEP is not enabled. Please set --moe-enable-deepep to use DeepEP backend.");
    const auto etp = m.expert_tensor_parallel_size.value_or(c.a.distributed.tensor_model_parallel_size);
    c.require(etp * m.expert_model_parallel_size > 1,
              "Flex token dispatcher requires TPxEP > 1 (--expert-tensor-parallel-size x --expert-model-parallel-size); "
              "use --moe-token-dispatcher-type alltoall on one rank");
  }
  if (m.moe_shared_expert_intermediate_size)
    c.require(*m.moe_shared_expert_intermediate_size > 0, "--moe-shared-expert-intermediate-size must be > 0");
  if (m.moe_shared_expert_overlap)
    c.require(m.moe_token_dispatcher_type == "alltoall", "--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall");
  const auto* lbt_list = std::get_if<std::vector<std::string>>(&m.moe_router_load_balancing_type);
  const auto* coeff_list = std::get_if<std::vector<double>>(&m.moe_aux_loss_coeff);
  if (lbt_list)
    c.require(coeff_list && coeff_list->size() == lbt_list->size(),
              "--moe-aux-loss-coeff needs one value per --moe-router-load-balancing-type entry");
  if (m.moe_expert_capacity_factor && *m.moe_expert_capacity_factor < 0) m.moe_expert_capacity_factor.reset();
  if (m.moe_expert_capacity_factor) {
    auto allowed = [](const std::string& t) { return t == "aux_loss" || t == "seq_aux_loss" || t == "global_aux_loss" || t == "none"; };
    bool ok = lbt_list ? std::all_of(lbt_list->begin(), lbt_list->end(), allowed)
                       : allowed(std::get<std::string>(m.moe_router_load_balancing_type));
    c.require(ok, "--moe-expert-capacity-factor needs --moe-router-load-balancing-type aux_loss, seq_aux_loss, global_aux_loss or none");
  }
  if (m.moe_pad_expert_input_to_capacity)
    c.require(m.moe_expert_capacity_factor.has_value(), "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
  if (c.a.training.add_bias_linear)
    c.require(m.expert_tensor_parallel_size.value_or(1) == 1, "bias in MoE experts is only supported with --expert-tensor-parallel-size 1 "
                                                              "(or add --disable-bias-linear)");
  // Megatron asserts these in the experts' and the router's first forward; refused up front.
  if (m.moe_apply_probs_on_input)
    c.require(m.moe_router_topk == 1, "--moe-apply-probs-on-input only works with --moe-router-topk 1");
  // One type (nargs='+' may hold it as a one-element list) takes one coefficient.
  const auto* many_types = std::get_if<std::vector<std::string>>(&m.moe_router_load_balancing_type);
  const std::string* one_type = many_types && many_types->size() == 1 ? &many_types->front()
                                                                       : std::get_if<std::string>(&m.moe_router_load_balancing_type);
  const auto* many_coeffs = std::get_if<std::vector<double>>(&m.moe_aux_loss_coeff);
  const auto* one_coeff = many_coeffs && many_coeffs->size() == 1 ? &many_coeffs->front() : std::get_if<double>(&m.moe_aux_loss_coeff);
  if (one_type && !one_coeff)
    c.error("--moe-aux-loss-coeff has " + show(many_coeffs->size()) + " values but --moe-router-load-balancing-type " +
            *one_type + " is one type; give one coefficient, or one type per coefficient");
  if (one_type && *one_type == "sinkhorn")
    c.require(one_coeff && *one_coeff == 0, "--moe-router-load-balancing-type sinkhorn does not support an aux loss "
                                            "(leave --moe-aux-loss-coeff at 0)");
  if (m.moe_input_jitter_eps)
    c.require(*m.moe_input_jitter_eps > 0, "--moe-input-jitter-eps must be > 0 (the noise is uniform in "
                                           "[1 - eps, 1 + eps], which torch's Uniform needs non-empty)");
  if (m.moe_router_enable_expert_bias)
    c.require(m.moe_router_score_function == "sigmoid", "expert bias for aux-loss-free routing needs --moe-router-score-function sigmoid");
  // Megatron compares the type with "sinkhorn": a list is never equal to it.
  const auto* single_type = std::get_if<std::string>(&m.moe_router_load_balancing_type);
  if (m.moe_router_topk == 1 && m.moe_router_score_function == "softmax" && !m.moe_router_pre_softmax &&
      !(single_type && *single_type == "sinkhorn"))
    c.error("please use --moe-router-pre-softmax when topk is 1 (--moe-router-topk 1 with the softmax score function)");
  if (m.moe_router_group_topk) {
    if (c.require(m.moe_router_num_groups.has_value(), "--moe-router-group-topk needs --moe-router-num-groups")) {
      c.require(*m.num_experts % *m.moe_router_num_groups == 0, "--num-experts must be divisible by --moe-router-num-groups");
      c.require(*m.moe_router_group_topk <= *m.moe_router_num_groups, "--moe-router-group-topk must be <= --moe-router-num-groups");
    }
  }
  if (m.overlap_moe_expert_parallel_comm) {
    c.require(m.expert_model_parallel_size > 1, "--overlap-moe-expert-parallel-comm needs --expert-model-parallel-size > 1");
    c.require(m.moe_token_dispatcher_type == "alltoall" || m.moe_token_dispatcher_type == "flex",
              "--overlap-moe-expert-parallel-comm needs the alltoall or flex dispatcher");
    c.require(c.a.mixed_precision.bf16 || c.a.mixed_precision.fp16, "--overlap-moe-expert-parallel-comm needs --bf16 or --fp16");
    const auto& d = c.a.distributed;
    if (d.pipeline_model_parallel_size > 1)
      c.require(c.a.derived.virtual_pipeline_model_parallel_size.has_value(),
                "--overlap-moe-expert-parallel-comm with --pipeline-model-parallel-size > 1 needs virtual pipeline stages "
                "(--num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank)");
    const auto& t = c.a.training;
    c.require(t.recompute_granularity != "full", "--overlap-moe-expert-parallel-comm cannot be combined with --recompute-granularity full");
    c.require(!t.recompute_method, "--overlap-moe-expert-parallel-comm cannot be combined with --recompute-method");
    c.require(!t.recompute_num_layers, "--overlap-moe-expert-parallel-comm cannot be combined with --recompute-num-layers");
    c.require(!m.moe_shared_expert_overlap, "--overlap-moe-expert-parallel-comm cannot be combined with --moe-shared-expert-overlap");
    c.require(c.a.network_size.mtp_num_layers.value_or(1) == 1, "--overlap-moe-expert-parallel-comm allows at most one MTP layer (--mtp-num-layers 1)");
  }
}

void recompute(validation_context& c) {  // rules 103, 104
  auto& t = c.a.training;
  if (c.a.moe.moe_layer_recompute) {
    c.require(t.recompute_granularity != "full", "--moe-layer-recompute cannot be combined with --recompute-granularity full");
    t.recompute_granularity = "selective";
    if (!t.recompute_modules) t.recompute_modules = std::vector<std::string>{"core_attn"};
    t.recompute_modules->push_back("moe");
  }
  if (!t.recompute_granularity) return;
  const auto& g = *t.recompute_granularity;
  if (g == "full") {
    c.require(t.recompute_method == "block" || t.recompute_method == "uniform",
              "--recompute-granularity full needs --recompute-method uniform or block");
    c.require(t.recompute_num_layers.has_value(), "--recompute-granularity full needs --recompute-num-layers");
    // Megatron's uniform method loops forever on 0 and block recomputes nothing: refuse both.
    if (t.recompute_num_layers)
      c.require(*t.recompute_num_layers >= 1, "--recompute-num-layers must be at least 1 (got " +
                                                  std::to_string(*t.recompute_num_layers) + ")");
  } else if (g == "selective") {
    c.require(!t.recompute_num_layers, "--recompute-num-layers is only used with --recompute-granularity full");
    const std::vector<std::string> allowed = {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"};
    for (const auto& m : t.recompute_modules.value_or(std::vector<std::string>{"core_attn"}))
      c.require(std::find(allowed.begin(), allowed.end(), m) != allowed.end(),
                "--recompute-modules: '" + m + "' is not one of core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts");
    const auto modules = t.recompute_modules.value_or(std::vector<std::string>{});
    if (std::find(modules.begin(), modules.end(), "shared_experts") != modules.end() &&
        c.a.moe.moe_shared_expert_intermediate_size && c.a.moe.moe_shared_expert_overlap)
      c.error("shared_experts recompute cannot work with --moe-shared-expert-overlap (drop one of them)");
    const auto& m = c.a.moe;
    if (std::find(modules.begin(), modules.end(), "moe_act") != modules.end() && m.num_experts && m.moe_grouped_gemm &&
        m.moe_use_legacy_grouped_gemm && c.a.transformer_engine.fp8)  // GroupedMLP.__init__
      c.error("moe_act recompute for fp8 cannot work with the legacy GroupedMLP; drop moe_act from --recompute-modules "
              "or --moe-use-legacy-grouped-gemm");
  }
  if (t.distribute_saved_activations)
    c.require(!t.sequence_parallel, "--distribute-saved-activations cannot be combined with --sequence-parallel");
}

void uneven_pipeline(validation_context& c) {  // rules 105-108
  const auto& d = c.a.distributed;
  const bool uneven = d.decoder_first_pipeline_num_layers || d.decoder_last_pipeline_num_layers;
  const bool accounting = d.account_for_embedding_in_pipeline_split || d.account_for_loss_in_pipeline_split;
  if (!uneven && !accounting && !d.pipeline_model_parallel_layout) return;  // the even split: rules 23-24
  if (!c.a.network_size.num_layers || d.pipeline_model_parallel_size < 1) return;
  // Accounting alone: rules 23-24 (validate_parallel) already named layers that do not divide over pp.
  const std::int64_t counted = *c.a.network_size.num_layers + int(d.account_for_embedding_in_pipeline_split) +
                               int(d.account_for_loss_in_pipeline_split);
  if (!uneven && !d.pipeline_model_parallel_layout && counted % d.pipeline_model_parallel_size != 0) return;
  try {
    split_pipeline_layers(pipeline_split_settings::of(c.a));
  } catch (const std::invalid_argument& e) {
    c.error(e.what());
  }
}

// --quick-geglu and --glu-linear-offset against the fused bias activation (validate_args turns
// bias-GeLU fusion off without a bias): Megatron-Core's MLP fuses only gelu and swiglu when no
// per-token scale is given, and TransformerConfig refuses an offset for a fused non-quick_gelu unit.
void glu_variants(validation_context& c) {
  const auto& n = c.a.network_size;
  const auto& t = c.a.training;
  const bool gelu_fusion = t.bias_gelu_fusion && t.add_bias_linear;
  const bool fused = n.swiglu ? t.bias_swiglu_fusion : gelu_fusion;
  if (n.quick_geglu && !n.swiglu && gelu_fusion)
    c.error("--quick-geglu with bias-GeLU fusion fails in Megatron-Core's MLP (it fuses only gelu and swiglu "
            "for a dense model); add --no-bias-gelu-fusion (or --disable-bias-linear)");
  if (n.glu_linear_offset != 0.0 && fused && !n.quick_geglu)
    c.error("--glu-linear-offset=" + show(n.glu_linear_offset) + " needs --quick-geglu when the bias activation "
            "is fused; add " + std::string(n.swiglu ? "--no-bias-swiglu-fusion" : "--no-bias-gelu-fusion") +
            " or drop --glu-linear-offset");
}

void activations(validation_context& c) {  // rule 109
  const auto& n = c.a.network_size;
  const auto& t = c.a.training;
  const bool fusion = n.swiglu ? t.bias_swiglu_fusion : t.bias_gelu_fusion;
  if (n.swiglu && n.squared_relu) c.error("--squared-relu cannot be combined with --swiglu");
  if (n.swiglu && n.quick_geglu) c.error("--quick-geglu cannot be combined with --swiglu");
  glu_variants(c);
  if (!fusion) return;
  // TransformerConfig.__post_init__: the fused bias activations are gelu, swiglu and quick_geglu.
  c.require(!n.squared_relu, "When bias_activation_fusion is True, activation function should be either gelu, swiglu, or "
                             "quick_geglu: --squared-relu needs --no-bias-gelu-fusion (or --disable-bias-linear)");
  if (!n.swiglu && !n.quick_geglu)
    c.require(t.add_bias_linear, "bias_gelu_fusion needs bias; add --no-bias-gelu-fusion or drop --disable-bias-linear");
  if (t.use_te_activation_func) c.error("--use-te-activation-func cannot be combined with bias activation fusion");
}

// --use-te-activation-func (TransformerConfig.__post_init__, then the MLP it builds): Transformer
// Engine's activation ops exist for gelu, silu and relu (and their GLUs); without TE's module the
// MLP applies the activation to the whole fc1 output, which a gated unit cannot take.
void te_activation(validation_context& c) {
  const auto& n = c.a.network_size;
  if (!c.a.training.use_te_activation_func) return;
  if (n.squared_relu || n.quick_geglu || n.openai_gelu)
    c.error("--use-te-activation-func: TransformerEngine only support gelu, geglu, silu, swiglu, relu, reglu. If you "
            "don't want to use TransformerEngine activation function, set use_te_activation_func to False (drop "
            "--use-te-activation-func, or " + std::string(n.squared_relu ? "--squared-relu" : n.quick_geglu ? "--quick-geglu" : "--openai-gelu") + ")");
  if (n.swiglu && !uses_te_activation_module(c.a))
    c.error("--use-te-activation-func with --swiglu needs Transformer Engine's SwiGLU module (--transformer-impl "
            "transformer_engine and no --spec): Megatron-Core's MLP otherwise applies silu to the whole fc1 output and "
            "fails at linear_fc2");
}

// Training CUDA graphs, past rule 16's spellings and rule 81's full-recompute check: the TE RNG
// tracker that rule 81 turns on, and TransformerConfig.__post_init__'s recomputation rule.
static void cuda_graph_rules(validation_context& c) {
  const auto& i = c.a.inference;
  const auto& t = c.a.training;
  if (i.cuda_graph_impl == "none") return;
  c.require(i.cuda_graph_impl == "transformer_engine" || i.cuda_graph_impl == "local",
            "--cuda-graph-impl must be transformer_engine or local");
  if (c.a.transformer_engine.transformer_impl == "transformer_engine" && !c.a.transformer_engine.te_rng_tracker) {
    c.a.transformer_engine.te_rng_tracker = true;
    c.warn("te_rng_tracker is not enabled, enabling it for CUDA graphs.");
  }
  if (!t.recompute_granularity || *t.recompute_granularity == "full") return;  // full: rule 81
  if (*t.recompute_granularity != "selective" || i.cuda_graph_impl != "transformer_engine" || i.cuda_graph_scope != "attn")
    return c.error("CUDA graphs not supported with activation recomputation (Megatron allows only --recompute-granularity "
                   "selective with --cuda-graph-impl transformer_engine --cuda-graph-scope attn)");
  // TransformerConfig's default modules: core_attn.
  for (const auto& m : t.recompute_modules.value_or(std::vector<std::string>{"core_attn"}))
    if (m == "core_attn" || m == "mla_up_proj")
      c.error("attn cuda graph is not supported with " + m + " recompute; drop " + m + " from --recompute-modules");
}

void transformer_features(validation_context& c) {  // rules 113, 115-117
  const auto& t = c.a.training;
  cuda_graph_rules(c);
  context_parallel_attention_rules(c);
  const std::int64_t layers = c.a.network_size.num_layers.value_or(0);
  if (const auto& f = c.a.network_size.no_rope_freq) {
    if (const auto* n = std::get_if<std::int64_t>(&*f))
      c.require(*n > 0 && layers % *n == 0, "--no-rope-freq=" + show(*n) + " must divide --num-layers=" + show(layers));
    else
      c.require(static_cast<std::int64_t>(std::get<std::vector<std::int64_t>>(*f).size()) == layers,
                "--no-rope-freq pattern length must equal --num-layers=" + show(layers));
  }
  if (c.a.network_size.multi_latent_attention) {
    const std::string rope = t.rope_type.value_or("yarn");
    if (t.apply_rope_fusion && c.a.network_size.position_embedding_type == "rope")
      c.require(rope == "yarn", "rope fusion with --multi-latent-attention needs --rope-type yarn");
    if (c.a.mla.cache_mla_latents) c.require(!t.apply_rope_fusion, "--cache-mla-latents is incompatible with rope fusion (add --no-rope-fusion)");
    c.require(!c.a.network_size.rotary_interleaved, "--rotary-interleaved is not supported with --multi-latent-attention");
  }
}

// --qk-l2-norm: the layer specs that take it assert it away from MLA; where gpt_builders does not
// pass it (the local spec without MoE, an imported --spec, the Mamba stack) Megatron builds no
// L2 norm, and mactor says so rather than leave the flag looking applied.
void qk_l2_norm_rules(validation_context& c) {
  if (!c.a.vision.qk_l2_norm) return;
  if (!applies_qk_l2_norm(c.a)) {
    c.warn("--qk-l2-norm has no effect here: Megatron passes it only to the Transformer Engine layer spec and the MoE "
           "block spec (not to --transformer-impl local without --num-experts, an imported --spec or the Mamba stack)");
    return;
  }
  if (c.a.network_size.multi_latent_attention)
    c.error("qk_l2_norm is not supported with MLA (Megatron's GPT layer specs assert it): drop --qk-l2-norm or "
            "--multi-latent-attention");
  // run_realtime_tests reads q_layernorm.weight whenever --qk-layernorm is set; L2Norm has none.
  if (c.a.vision.qk_layernorm && c.a.validation.test_mode)
    c.error("--test-mode with --qk-layernorm compares the query/key norm weights, which --qk-l2-norm's L2Norm does not "
            "have (Megatron fails reading them): drop --test-mode or --qk-layernorm");
}

// Sliding-window attention, the softmax sink and RoPE's frequency options: Megatron checks none
// of these values, but a GPT is causal (Transformer Engine forces the window's right side to 0,
// the local spec would attend to later tokens) and a zero factor divides by zero.
void attention_variants(validation_context& c) {
  const auto& n = c.a.network_size;
  const std::int64_t layers = n.num_layers.value_or(0);
  if (const auto& w = n.window_size) {
    c.require(w->size() == 2, "--window-size takes two values (left, right), e.g. --window-size 4096,0");
    if (w->size() == 2)
      c.require((*w)[0] >= -1 && (*w)[1] == 0,
                "--window-size " + show((*w)[0]) + "," + show((*w)[1]) +
                    " is not causal: give (left, 0) with left >= 0, or -1 for an unbounded window");
  }
  if (const auto& f = n.window_attn_skip_freq) {
    if (const auto* every = std::get_if<std::int64_t>(&*f))
      c.require(*every > 0, "--window-attn-skip-freq=" + show(*every) + " must be a positive layer count");
    else
      c.require(static_cast<std::int64_t>(std::get<std::vector<std::int64_t>>(*f).size()) == layers,
                "--window-attn-skip-freq pattern length must equal --num-layers=" + show(layers));
  }
  if (const auto& factor = n.rotary_seq_len_interpolation_factor)
    c.require(*factor >= 1, "--rotary-seq-len-interpolation-factor=" + show(*factor) +
                                " must be at least 1 (positions are divided by it); drop the flag for none");
  if (n.use_rope_scaling)
    c.require(n.rope_scaling_factor > 0, "--rope-scaling-factor must be positive with --use-rope-scaling");
  qk_l2_norm_rules(c);
}

}  // namespace

void validate_transformer_config(validation_context& c) {
  heads_and_groups(c);
  model_parallel_config(c);
  low_precision(c);
  moe_rules(c);
  recompute(c);
  uneven_pipeline(c);
  activations(c);
  te_activation(c);
  transformer_features(c);
  attention_variants(c);
}

}  // namespace mactor::config::detail
