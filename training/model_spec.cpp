// The mapping from Megatron's flags to model/, data/ and optimizer inputs (one place, read by the trainer).
#include "training/model_spec.hpp"

#include <stdexcept>
#include <variant>

#include "config/layer_spec.hpp"
#include "data/data_args_file.hpp"
#include "data/dataset_tokenizer.hpp"
#include "data/dataset_request.hpp"

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

namespace {

data::tokenizer_options tokenizer_options_from_args(const config::megatron_args& a) {
  const auto& t = a.tokenizer;
  data::tokenizer_options o;
  o.tokenizer_type = t.tokenizer_type.value_or("GPT2BPETokenizer");  // validation applied pretrain_gpt's default
  o.vocab_file = t.vocab_file;
  o.merge_file = t.merge_file;
  o.tokenizer_model = t.tokenizer_model;
  o.vocab_size = t.vocab_size;
  o.tiktoken_pattern = t.tiktoken_pattern;
  o.tiktoken_num_special_tokens = t.tiktoken_num_special_tokens;
  o.tiktoken_special_tokens = t.tiktoken_special_tokens;
  o.legacy_tokenizer = t.legacy_tokenizer;
  o.tokenizer_metadata = t.tokenizer_metadata;
  return o;
}

}  // namespace

std::unique_ptr<data::tokenizer> tokenizer_from_args(const config::megatron_args& a) {
  const auto o = tokenizer_options_from_args(a);
  // pretrain_gpt always builds the legacy global tokenizer too (for the padded vocabulary size),
  // and its CustomTikTokenizer asserts a pattern even when the datasets use the default path.
  if (o.tokenizer_type == "TikTokenizer" && !o.tiktoken_pattern)
    throw data::data_error("--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2 (Megatron asserts it)");
  if (o.tokenizer_type == "NullTokenizer" && !o.vocab_size)
    throw data::data_error("--tokenizer-type NullTokenizer needs --vocab-size (e.g. --vocab-size 8192)");
  return data::make_tokenizer(o);
}

data::gpt_dataset_config dataset_config_from_args(const config::megatron_args& a, const data::tokenizer& tok) {
  data::gpt_dataset_config c;
  c.sequence_length = *a.data.seq_length;
  c.random_seed = static_cast<std::uint32_t>(a.initialization.seed);
  c.split = a.data.split;
  if (a.data.data_path && !a.data.data_path->empty()) c.blend = data::blend_from_list(*a.data.data_path);
  if (a.data.data_args_path) c.blend = data::blend_from_list(data::data_args_file_words(*a.data.data_args_path));
  std::array<std::optional<std::vector<std::string>>, 3> per_split = {a.data.train_data_path, a.data.valid_data_path,
                                                                      a.data.test_data_path};
  if (a.data.per_split_data_args_path) per_split = data::per_split_data_args_file(*a.data.per_split_data_args_path);
  for (std::size_t i = 0; i < 3; ++i)
    if (per_split[i] && !per_split[i]->empty()) c.blend_per_split[i] = data::blend_from_list(*per_split[i]);
  c.mock = a.data.mock_data;
  c.reset_position_ids = a.data.reset_position_ids;
  c.reset_attention_mask = a.data.reset_attention_mask;
  c.eod_mask_loss = a.data.eod_mask_loss;
  c.multiple_validation_sets = a.validation.multiple_validation_sets;
  c.create_attention_mask = a.data.create_attention_mask_in_dataloader;
  c.path_to_cache = a.data.data_cache_path;
  c.mid_level_dataset_surplus = a.data.mid_level_dataset_surplus;
  const auto dataset_tok = data::make_dataset_tokenizer(tokenizer_options_from_args(a), tok);
  c.eod = dataset_tok.eod;
  c.pad = dataset_tok.pad;
  c.tokenizer_identifiers = dataset_tok.identifiers;
  c.finalize();
  return c;
}

std::array<std::optional<std::int64_t>, 3> split_sample_counts(const config::megatron_args& a) {
  data::sample_count_args c;
  c.train_samples = a.training.train_samples;
  c.train_iters = a.training.train_iters.value_or(0);
  c.global_batch_size = *a.training.global_batch_size;
  c.eval_interval = a.validation.eval_interval;
  c.eval_iters = a.validation.eval_iters;
  c.full_validation = a.validation.full_validation;
  return data::train_valid_test_num_samples(c);
}

model::optimizer_options optimizer_options_from_args(const config::megatron_args& a) {
  model::optimizer_options o;
  const auto kind = model::parse_optimizer_kind(a.training.optimizer);
  if (!kind) throw std::invalid_argument("--optimizer " + a.training.optimizer + " is not one of adam, sgd");
  o.optimizer = *kind;
  o.lr = *a.learning_rate.lr;
  o.min_lr = a.learning_rate.min_lr;
  o.decoupled_lr = a.learning_rate.decoupled_lr;
  o.decoupled_min_lr = a.learning_rate.decoupled_min_lr;
  o.weight_decay = a.regularization.weight_decay;
  o.adam_beta1 = a.regularization.adam_beta1;
  o.adam_beta2 = a.regularization.adam_beta2;
  o.adam_eps = a.regularization.adam_eps;
  o.sgd_momentum = a.regularization.sgd_momentum;
  // --use-precision-aware-optimizer: TE FusedAdam's moment dtypes (validation mapped the flags to
  // torch dtype names; they stay fp32 without the flag). --optimizer-cpu-offload builds Megatron's
  // HybridDeviceOptimizer instead, whose torch Adam/SGD keep fp32 moments whatever they say.
  if (a.training.optimizer_cpu_offload) return o;
  o.exp_avg_dtype = model::parse_state_dtype(a.experimental.exp_avg_dtype).value_or(model::state_dtype::fp32);
  o.exp_avg_sq_dtype = model::parse_state_dtype(a.experimental.exp_avg_sq_dtype).value_or(model::state_dtype::fp32);
  return o;
}

model::lr_schedule_args lr_schedule_args_from_args(const config::megatron_args& a) {
  model::lr_schedule_args s;
  const auto& lr = a.learning_rate;
  s.train_iters = a.training.train_iters;
  s.train_samples = a.training.train_samples;
  s.global_batch_size = *a.training.global_batch_size;
  s.lr = lr.lr;
  s.min_lr = lr.min_lr;
  s.lr_warmup_init = lr.lr_warmup_init;
  s.lr_warmup_fraction = lr.lr_warmup_fraction;
  s.lr_warmup_iters = lr.lr_warmup_iters;
  s.lr_warmup_samples = lr.lr_warmup_samples;
  s.lr_decay_iters = lr.lr_decay_iters;
  s.lr_decay_samples = lr.lr_decay_samples;
  s.lr_decay_style = lr.lr_decay_style;
  s.lr_wsd_decay_iters = lr.lr_wsd_decay_iters;
  s.lr_wsd_decay_samples = lr.lr_wsd_decay_samples;
  s.lr_wsd_decay_style = lr.lr_wsd_decay_style;
  s.weight_decay = a.regularization.weight_decay;
  s.start_weight_decay = a.regularization.start_weight_decay;
  s.end_weight_decay = a.regularization.end_weight_decay;
  s.weight_decay_incr_style = a.regularization.weight_decay_incr_style;
  s.use_checkpoint_opt_param_scheduler = lr.use_checkpoint_opt_param_scheduler;
  s.override_opt_param_scheduler = lr.override_opt_param_scheduler;
  return s;
}

}  // namespace mactor::training

namespace mactor::training {

std::optional<model::grad_scaler_options> grad_scaler_options_from_args(const config::megatron_args& a) {
  const auto& m = a.mixed_precision;
  if (!m.fp16 && !m.bf16) return std::nullopt;
  model::grad_scaler_options o;
  if (m.loss_scale) {
    o.dynamic = false;
    o.initial_scale = static_cast<float>(*m.loss_scale);
    return o;
  }
  if (!m.fp16) return std::nullopt;
  o.initial_scale = static_cast<float>(m.initial_loss_scale);
  o.min_scale = static_cast<float>(m.min_loss_scale);
  o.growth_interval = static_cast<std::int64_t>(m.loss_scale_window);
  o.hysteresis = m.hysteresis;
  return o;
}

}  // namespace mactor::training
