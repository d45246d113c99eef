// Megatron's flags as model/'s inputs: the GPT model config, its fp8, MoE and MLA settings and the
// recompute plan (model_spec.hpp; the data and optimizer inputs are data_spec.cpp and optimizer_spec.cpp).
#include "training/model_spec.hpp"

#include <stdexcept>
#include <variant>

#include "config/layer_spec.hpp"

namespace mactor::training {

namespace {

// Megatron's fp8 flags as the model's fp8 settings (validation checked their values and rules).
model::fp8_settings fp8_settings_from_args(const config::transformer_engine_args& te) {
  model::fp8_settings f;
  f.enabled = te.fp8.has_value();
  f.fp8 = te.fp8.value_or("e4m3") == "hybrid" ? model::fp8_format::hybrid : model::fp8_format::e4m3;
  f.recipe = te.fp8_recipe == "tensorwise" ? model::fp8_recipe::tensorwise
             : te.fp8_recipe == "mxfp8"    ? model::fp8_recipe::mxfp8
             : te.fp8_recipe == "blockwise" ? model::fp8_recipe::blockwise
                                            : model::fp8_recipe::delayed;
  f.fp8_margin = static_cast<int>(te.fp8_margin);
  f.fp8_amax_history_len = static_cast<int>(te.fp8_amax_history_len);
  f.amax_compute_algo = te.fp8_amax_compute_algo == "max" ? model::fp8_amax_compute_algo::max
                                                          : model::fp8_amax_compute_algo::most_recent;
  f.fp8_wgrad = te.fp8_wgrad;
  f.first_last_layers_bf16 = te.first_last_layers_bf16;
  f.num_layers_at_start_in_bf16 = static_cast<int>(te.num_layers_at_start_in_bf16);
  f.num_layers_at_end_in_bf16 = static_cast<int>(te.num_layers_at_end_in_bf16);
  return f;
}

// Megatron's int-or-list layer selector (--no-rope-freq, --window-attn-skip-freq).
model::layer_frequency layer_frequency_from(const std::optional<config::int_or_list>& f) {
  model::layer_frequency out;
  if (!f) return out;
  if (const auto* every = std::get_if<std::int64_t>(&*f)) out.every = static_cast<int>(*every);
  else
    for (auto v : std::get<std::vector<std::int64_t>>(*f)) out.list.push_back(static_cast<int>(v));
  return out;
}

// Megatron's MoE flags as the model's MoE settings (validation and the flag table refused what
// the layer does not build: lists of load-balancing types, other score functions, ...).
model::moe_settings moe_settings_from_args(const config::megatron_args& a) {
  const auto& m = a.moe;
  model::moe_settings s;
  if (!m.num_experts) return s;
  s.num_experts = static_cast<int>(*m.num_experts);
  if (const auto* every = std::get_if<std::int64_t>(&m.moe_layer_freq)) s.layer_freq_every = static_cast<int>(*every);
  else
    for (auto v : std::get<std::vector<std::int64_t>>(m.moe_layer_freq)) s.layer_freq_list.push_back(static_cast<int>(v));
  s.ffn_hidden_size = static_cast<int>(m.moe_ffn_hidden_size.value_or(a.network_size.ffn_hidden_size.value_or(0)));
  s.router_topk = static_cast<int>(m.moe_router_topk);
  s.shared_expert_intermediate_size = static_cast<int>(m.moe_shared_expert_intermediate_size.value_or(0));
  s.router_pre_softmax = m.moe_router_pre_softmax;
  s.router_topk_scaling_factor = m.moe_router_topk_scaling_factor;
  s.score_function = m.moe_router_score_function == "sigmoid" ? model::moe_score_function::sigmoid
                                                               : model::moe_score_function::softmax;
  s.router_num_groups = static_cast<int>(m.moe_router_num_groups.value_or(0));
  s.router_group_topk = static_cast<int>(m.moe_router_group_topk.value_or(0));
  // nargs='+': a single value may arrive as a one-element list.
  const auto* types = std::get_if<std::vector<std::string>>(&m.moe_router_load_balancing_type);
  const auto* type = types && types->size() == 1 ? &types->front() : std::get_if<std::string>(&m.moe_router_load_balancing_type);
  s.load_balancing = type && *type == "seq_aux_loss"      ? model::moe_load_balancing::seq_aux_loss
                     : type && *type == "global_aux_loss" ? model::moe_load_balancing::global_aux_loss
                     : type && *type == "sinkhorn"   ? model::moe_load_balancing::sinkhorn
                     : type && *type == "none"       ? model::moe_load_balancing::none
                                                     : model::moe_load_balancing::aux_loss;
  if (const auto* coeff = std::get_if<double>(&m.moe_aux_loss_coeff)) s.aux_loss_coeff = *coeff;
  else if (const auto& coeffs = std::get<std::vector<double>>(m.moe_aux_loss_coeff); coeffs.size() == 1)
    s.aux_loss_coeff = coeffs.front();
  if (types && types->size() > 1) {  // the list form: one coefficient each (validation: same length)
    const auto& coeffs = std::get<std::vector<double>>(m.moe_aux_loss_coeff);
    for (std::size_t i = 0; i < types->size(); ++i) {
      const auto& t = (*types)[i];
      // Megatron looks the list up for aux_loss, seq_aux_loss and global_aux_loss only.
      if (t == "aux_loss") s.load_balancing_list.emplace_back(model::moe_load_balancing::aux_loss, coeffs[i]);
      if (t == "seq_aux_loss") s.load_balancing_list.emplace_back(model::moe_load_balancing::seq_aux_loss, coeffs[i]);
      if (t == "global_aux_loss") s.load_balancing_list.emplace_back(model::moe_load_balancing::global_aux_loss, coeffs[i]);
    }
    s.load_balancing = model::moe_load_balancing::none;
  }
  s.z_loss_coeff = m.moe_z_loss_coeff;
  // Under --moe-use-legacy-grouped-gemm Megatron builds GroupedMLP instead of TEGroupedMLP.
  s.grouped_gemm = m.moe_grouped_gemm && !m.moe_use_legacy_grouped_gemm;
  s.delay_wgrad_compute = m.delay_wgrad_compute;
  s.legacy_grouped_gemm = m.moe_grouped_gemm && m.moe_use_legacy_grouped_gemm;
  s.expert_capacity_factor = m.moe_expert_capacity_factor;  // validation dropped a negative one
  s.drop_by_position = m.moe_token_drop_policy == "position";
  s.apply_probs_on_input = m.moe_apply_probs_on_input;  // validation: top-1
  s.input_jitter_eps = m.moe_input_jitter_eps;
  s.force_load_balancing = m.moe_router_force_load_balancing;
  // Megatron's get_fp8_align_size (validation: fp8 is on).
  if (m.moe_router_padding_for_fp8) s.router_padding_multiple = a.transformer_engine.fp8_recipe == "mxfp8" ? 32 : 16;
  s.enable_expert_bias = m.moe_router_enable_expert_bias;  // validation: sigmoid scores
  s.bias_update_rate = m.moe_router_bias_update_rate;
  if (m.moe_router_dtype == "fp32") s.router_dtype = tensor::dtype::float32;
  if (m.moe_router_dtype == "fp64") s.router_dtype = tensor::dtype::float64;
  s.per_token_loss = a.training.calculate_per_token_loss;
  return s;
}

// MLATransformerConfig from the flags: rope_type unset takes the class default, yarn.
model::mla_settings mla_settings_from_args(const config::megatron_args& a) {
  model::mla_settings m;
  m.enabled = a.network_size.multi_latent_attention;
  m.q_lora_rank = static_cast<int>(a.mla.q_lora_rank.value_or(0));
  m.kv_lora_rank = static_cast<int>(a.mla.kv_lora_rank);
  m.qk_head_dim = static_cast<int>(a.mla.qk_head_dim);
  m.qk_pos_emb_head_dim = static_cast<int>(a.mla.qk_pos_emb_head_dim);
  m.v_head_dim = static_cast<int>(a.mla.v_head_dim);
  m.yarn = a.training.rope_type.value_or("yarn") == "yarn";
  m.rotary_scaling_factor = a.mla.rotary_scaling_factor;
  m.mscale = a.mla.mscale;
  m.mscale_all_dim = a.mla.mscale_all_dim;
  return m;
}

model::softmax_kind softmax_kind_from(const std::string& type) {  // validation checked the choice
  return type == "learnable"    ? model::softmax_kind::learnable
         : type == "off-by-one" ? model::softmax_kind::off_by_one
                                : model::softmax_kind::vanilla;
}

}  // namespace

model::gpt_model_config model_config_from_args(const config::megatron_args& a, std::int64_t padded_vocab_size, int tp_rank,
                                               int cp_rank, int ep_rank, int etp_rank) {
  const auto& n = a.network_size;
  const auto& t = a.training;
  model::gpt_model_config c;
  c.num_layers = static_cast<int>(*n.num_layers);
  c.hidden_size = static_cast<int>(*n.hidden_size);
  c.ffn_hidden_size = static_cast<int>(*n.ffn_hidden_size);
  c.num_attention_heads = static_cast<int>(*n.num_attention_heads);
  c.num_query_groups = n.group_query_attention ? static_cast<int>(n.num_query_groups) : 0;  // rule 85
  c.kv_channels = static_cast<int>(n.kv_channels.value_or(0));
  c.seq_length = static_cast<int>(*a.data.seq_length);
  c.max_position_embeddings = static_cast<int>(*n.max_position_embeddings);
  c.padded_vocab_size = static_cast<int>(padded_vocab_size);
  c.normalization = n.normalization == "RMSNorm" ? model::normalization_kind::rms_norm : model::normalization_kind::layer_norm;
  c.norm_epsilon = static_cast<float>(n.norm_epsilon);
  c.apply_layernorm_1p = n.apply_layernorm_1p;
  c.position_embedding_type = n.position_embedding_type == "rope"   ? model::position_embedding_kind::rope
                              : n.position_embedding_type == "none" ? model::position_embedding_kind::none
                                                                    : model::position_embedding_kind::learned_absolute;
  c.rotary_base = static_cast<double>(n.rotary_base);
  c.rotary_percent = static_cast<float>(n.rotary_percent);
  c.rotary_interleaved = n.rotary_interleaved;
  c.rotary_seq_len_interpolation_factor = static_cast<double>(n.rotary_seq_len_interpolation_factor.value_or(1));
  c.use_rope_scaling = n.use_rope_scaling;
  c.rope_scaling_factor = n.rope_scaling_factor;
  c.no_rope_freq = layer_frequency_from(n.no_rope_freq);
  c.window_size = n.window_size.value_or(std::vector<std::int64_t>{});
  c.window_attn_skip_freq = layer_frequency_from(n.window_attn_skip_freq);
  c.softmax_type = softmax_kind_from(n.softmax_type);
  c.qk_layernorm = a.vision.qk_layernorm;
  c.qk_l2_norm = config::applies_qk_l2_norm(a);
  c.mla = mla_settings_from_args(a);
  c.swiglu = n.swiglu;
  c.squared_relu = n.squared_relu;
  c.fused_weighted_squared_relu = a.training.use_fused_weighted_squared_relu;
  c.quick_geglu = n.quick_geglu;
  // --use-te-activation-func under a TE spec: Transformer Engine's GELU (the tanh formula) and
  // SwiGLU ops, which know no clamp or offset.
  const bool te_activation = config::uses_te_activation_module(a);
  // Megatron-Core's MLP clamps and offsets only in its unfused glu: quick_geglu (validation refuses
  // it fused) or swiglu under --no-bias-swiglu-fusion; the fused swiglu and TE's ignore both.
  if (!te_activation && (n.quick_geglu || (n.swiglu && !t.bias_swiglu_fusion))) {
    if (n.activation_func_clamp_value) c.activation_func_clamp_value = static_cast<float>(*n.activation_func_clamp_value);
    c.glu_linear_offset = static_cast<float>(n.glu_linear_offset);
  }
  // Megatron's fused bias-GeLU (on when there is a bias and --no-bias-gelu-fusion is absent) and
  // --openai-gelu both compute the tanh approximation; otherwise torch's erf GeLU runs.
  c.gelu_tanh_approximation = n.openai_gelu || (te_activation && !n.swiglu) ||
                              (t.bias_gelu_fusion && t.add_bias_linear && !n.swiglu && !n.quick_geglu);
  c.add_bias_linear = t.add_bias_linear;
  c.add_qkv_bias = t.add_qkv_bias;
  c.attention_dropout = static_cast<float>(a.regularization.attention_dropout);
  c.hidden_dropout = static_cast<float>(a.regularization.hidden_dropout);
  c.untie_embeddings_and_output_weights = n.untie_embeddings_and_output_weights;
  c.init_method_std = static_cast<float>(a.initialization.init_method_std);
  if (const auto& e = a.initialization.embedding_init_method_std) c.embedding_init_method_std = static_cast<float>(*e);
  c.init_method_xavier_uniform = a.initialization.init_method_xavier_uniform;
  c.skip_weight_init = !a.checkpointing.perform_initialization;
  // Megatron's params_dtype (validation derives it from --bf16 / --fp16).
  c.params_dtype = *tensor::parse_dtype("torch." + a.derived.params_dtype);
  // Megatron's DistributedDataParallelConfig.grad_reduce_in_fp32 is
  // --accumulate-allreduce-grads-in-fp32 (validation turns it on under --bf16 unless
  // --grad-reduce-in-bf16; under --fp16 it stays off unless given); without it a 16-bit model's
  // grad buffer is of the model's dtype, and the optimizer widens it to fp32 main grads.
  if (tensor::is_half_precision(c.params_dtype) && !a.mixed_precision.accumulate_allreduce_grads_in_fp32)
    c.grad_buffer_dtype = c.params_dtype;
  c.seed = static_cast<std::uint64_t>(a.initialization.seed);
  c.tensor_model_parallel_size = static_cast<int>(a.distributed.tensor_model_parallel_size);
  c.tensor_model_parallel_rank = tp_rank;
  c.context_parallel_size = static_cast<int>(a.distributed.context_parallel_size);
  c.context_parallel_rank = cp_rank;
  c.cp_comm_types.clear();
  for (const auto& t : a.distributed.cp_comm_type)
    c.cp_comm_types.push_back(t == "p2p"       ? model::cp_comm_kind::p2p
                              : t == "a2a"     ? model::cp_comm_kind::a2a
                              : t == "a2a+p2p" ? model::cp_comm_kind::a2a_p2p
                                               : model::cp_comm_kind::allgather);
  if (c.cp_comm_types.empty()) c.cp_comm_types.push_back(model::cp_comm_kind::p2p);
  // Ring attention takes no document mask: with --reset-attention-mask's its layers all-gather.
  if (a.data.reset_attention_mask && a.data.create_attention_mask_in_dataloader)
    for (auto& kind : c.cp_comm_types)
      if (kind == model::cp_comm_kind::p2p || kind == model::cp_comm_kind::a2a_p2p)
        kind = model::cp_comm_kind::allgather;
  c.sequence_parallel = a.training.sequence_parallel;  // validation turned it off for tp == 1
  c.fp32_residual_connection = a.mixed_precision.fp32_residual_connection;  // validation: needs --bf16/--fp16
  c.recompute = recompute_from_args(a);
  c.fp8 = fp8_settings_from_args(a.transformer_engine);
  c.moe = moe_settings_from_args(a);
  if (c.moe.enabled()) {
    c.moe.expert_parallel_size = static_cast<int>(a.moe.expert_model_parallel_size);
    c.moe.expert_parallel_rank = ep_rank;
    const auto tp = a.distributed.tensor_model_parallel_size;
    c.moe.expert_tensor_parallel_size = static_cast<int>(a.moe.expert_tensor_parallel_size.value_or(tp));
    c.moe.expert_tensor_parallel_rank = etp_rank;
  }
  c.mtp_num_layers = static_cast<int>(n.mtp_num_layers.value_or(0));
  c.mtp_loss_scaling_factor = static_cast<float>(n.mtp_loss_scaling_factor);
  c.is_hybrid_model = a.experimental.is_hybrid_model;
  if (config::selects_mamba_stack(a)) {  // pretrain_mamba's MambaModel (resolve checked the rest)
    c.hybrid_layers = config::hybrid_layer_pattern(a);
    const auto& e = a.experimental;
    c.mamba = {static_cast<int>(e.mamba_state_dim), static_cast<int>(e.mamba_head_dim),
               static_cast<int>(e.mamba_num_groups), static_cast<int>(e.mamba_num_heads.value_or(0))};
  }
  return c;
}

model::recompute_config recompute_from_args(const config::megatron_args& a) {
  const auto& t = a.training;
  model::recompute_config r;
  if (!t.recompute_granularity) return r;  // validation mapped --recompute-activations to selective
  if (*t.recompute_granularity == "full") {
    r.granularity = model::recompute_granularity::full;
    r.method = t.recompute_method == "block" ? model::recompute_method::block : model::recompute_method::uniform;
    r.num_layers = static_cast<int>(t.recompute_num_layers.value_or(1));
    r.distribute_saved_activations = t.distribute_saved_activations;
    return r;
  }
  r.granularity = model::recompute_granularity::selective;
  // Megatron's default module list; moe, moe_act and shared_experts name modules a dense GPT does
  // not have, so they change nothing here (as in Megatron for such a model); mla_up_proj's
  // recomputation gives the same values, and multi-latent attention keeps those activations.
  for (const auto& m : t.recompute_modules.value_or(std::vector<std::string>{"core_attn"})) {
    if (m == "core_attn") r.core_attn = true;
    if (m == "layernorm") r.layernorm = true;
    if (m == "mlp") r.mlp = true;
    if (m == "moe") r.moe = true;
  }
  return r;
}

}  // namespace mactor::training
