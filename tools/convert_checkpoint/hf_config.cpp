// model_args <-> Megatron args / Hugging Face GPT2Config, LlamaConfig and MixtralConfig; DeepseekV3
// and Qwen3 / Qwen3-MoE in hf_deepseek_config.cpp and hf_qwen3_config.cpp.
#include "tools/convert_checkpoint/hf_config.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <vector>

#include "tools/convert_checkpoint/hf_llama_rope.hpp"
#include "tools/convert_checkpoint/hf_moe_families.hpp"

namespace mactor::convert {
namespace {

std::string join(const std::vector<std::string>& errors, const std::string& head) {
  return join_errors(errors, head);
}

// Every layer a MoE layer: --moe-layer-freq 1, or a list of ones.
bool every_layer_moe(const nlohmann::json& args, int num_layers) {
  auto it = args.find("moe_layer_freq");
  if (it == args.end() || it->is_null()) return true;
  if (it->is_number_integer()) return it->get<int>() == 1;
  if (!it->is_array() || int(it->size()) != num_layers) return false;
  for (const auto& v : *it)
    if (!v.is_number_integer() || v.get<int>() != 1) return false;
  return true;
}

// A number, or a one-element list (Megatron's nargs='+' flags); nullopt for a longer list.
std::optional<double> one_number(const nlohmann::json& args, const char* key, double fallback) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return fallback;
  if (it->is_number()) return it->get<double>();
  if (it->is_array() && it->size() == 1 && (*it)[0].is_number()) return (*it)[0].get<double>();
  return std::nullopt;
}

// MixtralForCausalLM routes softmax(all logits) -> top-k -> renormalized over the k, which is
// Megatron's default softmax over the top-k logits. Every other routing (or a MoE layer with more
// than the routed SwiGLU experts) computes something else and is refused.
void moe_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors) {
  a.num_experts = get_or<int>(args, "num_experts", 0);
  a.moe_router_topk = get_or<int>(args, "moe_router_topk", 2);
  a.moe_ffn_hidden_size = get_or<int>(args, "moe_ffn_hidden_size", a.ffn_hidden_size);
  // The legacy GroupedMLP saves each expert under SequentialMLP's names.
  a.moe_grouped_gemm = get_or<bool>(args, "moe_grouped_gemm", false) && !get_or<bool>(args, "moe_use_legacy_grouped_gemm", false);
  const std::string why = " (MixtralForCausalLM cannot express it)";
  if (a.family != hf_family::llama)
    errors.push_back("MoE is convertible only as MixtralForCausalLM, which needs the Llama style "
                     "(RMSNorm, rope, swiglu)");
  if (!every_layer_moe(args, a.num_layers))
    errors.push_back("moe_layer_freq makes some layers dense; MixtralForCausalLM needs every layer MoE "
                     "(moe_layer_freq 1)");
  if (a.moe_router_topk < 1 || a.moe_router_topk > a.num_experts)
    errors.push_back("moe_router_topk must lie in [1, num_experts]");
  if (get_or<std::string>(args, "moe_router_score_function", "softmax") != "softmax")
    errors.push_back("moe_router_score_function other than softmax" + why);
  if (get_or<bool>(args, "moe_router_pre_softmax", false) && a.moe_router_topk != a.num_experts)
    errors.push_back("moe_router_pre_softmax weights the top k by the softmax over all experts without "
                     "renormalizing; Mixtral renormalizes over the k" + why);
  if (const double s = get_or<double>(args, "moe_router_topk_scaling_factor", 1.0); s != 1.0)
    errors.push_back("moe_router_topk_scaling_factor " + std::to_string(s) + why);
  if (get_or<int>(args, "moe_router_num_groups", 0) > 0 || get_or<int>(args, "moe_router_group_topk", 0) > 0)
    errors.push_back("group-limited routing (moe_router_num_groups, moe_router_group_topk)" + why);
  if (get_or<bool>(args, "moe_router_enable_expert_bias", false))
    errors.push_back("moe_router_enable_expert_bias (the expert bias in the top-k choice)" + why);
  if (get_or<int>(args, "moe_shared_expert_intermediate_size", 0) > 0)
    errors.push_back("shared experts (moe_shared_expert_intermediate_size)" + why);
  refuse_unconvertible_routing(args, why, errors);
  if (!get_or<nlohmann::json>(args, "moe_input_jitter_eps", nullptr).is_null())
    errors.push_back("moe_input_jitter_eps (Mixtral's router_jitter_noise also scales the experts' input)" + why);
  if (a.add_bias_linear || a.add_qkv_bias)
    errors.push_back("biases (add_bias_linear, add_qkv_bias): MixtralForCausalLM has none");
  if (const auto c = one_number(args, "moe_aux_loss_coeff", 0.0)) a.moe_aux_loss_coeff = *c;
  else errors.push_back("moe_aux_loss_coeff has several values (one per load-balancing type)" + why);
  if (errors.empty()) a.family = hf_family::mixtral;
}

}  // namespace

model_args args_from_megatron(const nlohmann::json& args) {
  std::vector<std::string> errors;
  model_args a;
  auto required = [&](const char* key) -> std::int64_t {
    auto it = args.find(key);
    if (it == args.end() || it->is_null()) {
      errors.push_back(std::string("args has no \"") + key + "\"");
      return 0;
    }
    return it->get<std::int64_t>();
  };
  a.num_layers = int(required("num_layers"));
  a.hidden_size = int(required("hidden_size"));
  a.num_attention_heads = int(required("num_attention_heads"));
  a.padded_vocab_size = required("padded_vocab_size");
  a.max_position_embeddings = int(required("max_position_embeddings"));
  a.ffn_hidden_size = get_or<int>(args, "ffn_hidden_size", 4 * a.hidden_size);
  a.kv_channels = get_or<int>(args, "kv_channels",
                              a.num_attention_heads ? a.hidden_size / a.num_attention_heads : 0);
  a.num_query_groups = get_or<bool>(args, "group_query_attention", false)
                           ? get_or<int>(args, "num_query_groups", 1)
                           : a.num_attention_heads;
  a.seq_length = get_or<int>(args, "seq_length", a.max_position_embeddings);
  a.swiglu = get_or<bool>(args, "swiglu", false);
  a.untie_embeddings_and_output_weights =
      get_or<bool>(args, "untie_embeddings_and_output_weights", false);
  a.add_bias_linear = get_or<bool>(args, "add_bias_linear", true);
  a.add_qkv_bias = get_or<bool>(args, "add_qkv_bias", false);
  a.gelu_tanh = get_or<bool>(args, "openai_gelu", false) ||
                (get_or<bool>(args, "bias_gelu_fusion", true) && a.add_bias_linear && !a.swiglu);
  a.norm_epsilon = get_or<double>(args, "norm_epsilon", 1e-5);
  a.rotary_base = get_or<double>(args, "rotary_base", 10000.0);
  const auto norm = get_or<std::string>(args, "normalization", "LayerNorm");
  const auto pos = get_or<std::string>(args, "position_embedding_type", "learned_absolute");
  const bool mla = get_or<bool>(args, "multi_latent_attention", false);
  if (norm == "LayerNorm" && pos == "learned_absolute" && !a.swiglu)
    a.family = hf_family::gpt2;
  else if (norm == "RMSNorm" && (pos == "rope" || (mla && pos == "none")) && a.swiglu)
    a.family = hf_family::llama;
  else
    errors.push_back("normalization=" + norm + ", position_embedding_type=" + pos +
                     ", swiglu=" + (a.swiglu ? "true" : "false") +
                     " is neither GPT-2 style (LayerNorm, learned_absolute, no swiglu) nor Llama "
                     "style (RMSNorm, rope, swiglu)");
  if (get_or<bool>(args, "apply_layernorm_1p", false))
    errors.push_back("apply_layernorm_1p (zero-centered norm weights) has no Hugging Face equivalent");
  if (get_or<double>(args, "rotary_percent", 1.0) != 1.0)
    errors.push_back("rotary_percent != 1 has no LlamaForCausalLM equivalent");
  if (get_or<bool>(args, "rotary_interleaved", false))
    errors.push_back("rotary_interleaved has no LlamaForCausalLM equivalent");
  if (get_or<bool>(args, "squared_relu", false))
    errors.push_back("squared_relu is not convertible");
  if (get_or<bool>(args, "qk_l2_norm", false))
    errors.push_back("qk_l2_norm (Llama 4's L2 norm of the query and key heads) has no equivalent in the layouts "
                     "convert_checkpoint writes");
  // Multi-latent attention -> DeepseekV3; qk-layernorm -> Qwen3 (dense) or Qwen3-MoE; other MoE -> Mixtral.
  const bool moe = get_or<int>(args, "num_experts", 0) > 0;
  if (mla) deepseek_from_megatron(args, a, errors);
  else if (get_or<bool>(args, "qk_layernorm", false)) qwen3_from_megatron(args, a, errors);
  else if (moe) moe_from_megatron(args, a, errors);
  if (!mla && a.family != hf_family::gpt2) {
    const char* who = a.family == hf_family::mixtral ? "MixtralForCausalLM"
                      : a.family == hf_family::qwen3 ? "Qwen3ForCausalLM"
                      : a.family == hf_family::qwen3_moe ? "Qwen3MoeForCausalLM"
                                                         : "LlamaForCausalLM";
    llama_rope_from_megatron(args, a, who, errors);
  }
  // A hybrid Mamba model (pretrain_mamba, --spec ... mamba_stack_spec) saves its spec as a list.
  if (args.contains("spec") && args["spec"].is_array() && args["spec"].size() == 2 &&
      args["spec"][1] == "mamba_stack_spec")
    errors.push_back("a hybrid Mamba model (spec mamba_stack_spec) has no GPT2LMHeadModel or LlamaForCausalLM "
                     "equivalent");
  if (get_or<bool>(args, "quick_geglu", false))
    errors.push_back("quick_geglu (a quick-GeLU gated MLP) has no GPT2LMHeadModel or LlamaForCausalLM equivalent");
  // Megatron's fused SwiGLU ignores both; the unfused one applies them.
  const bool unfused_swiglu = a.swiglu && !get_or<bool>(args, "bias_swiglu_fusion", true);
  if (unfused_swiglu && (get_or<double>(args, "glu_linear_offset", 0.0) != 0.0 ||
                         get_or<double>(args, "activation_func_clamp_value", 0.0) != 0.0))
    errors.push_back("glu_linear_offset and activation_func_clamp_value have no LlamaForCausalLM equivalent");
  if (a.family == hf_family::gpt2 && !errors.size()) {
    if (a.num_query_groups != a.num_attention_heads)
      errors.push_back("GPT2LMHeadModel has no grouped-query attention (num_query_groups)");
    if (a.kv_channels * a.num_attention_heads != a.hidden_size)
      errors.push_back("GPT2LMHeadModel needs kv_channels * num_attention_heads == hidden_size");
  }
  if (!mla && (a.family == hf_family::llama || a.family == hf_family::gpt2) && pos == "none")
    errors.push_back("position_embedding_type none is convertible only with multi_latent_attention");
  if (a.num_query_groups <= 0 || a.num_attention_heads % std::max(1, a.num_query_groups) != 0)
    errors.push_back("num_attention_heads must be a multiple of num_query_groups");
  if (!errors.empty())
    throw std::invalid_argument(join(errors, "cannot convert this model to Hugging Face layout:"));
  return a;
}

nlohmann::json megatron_args_json(const model_args& a) {
  const bool llama = a.family != hf_family::gpt2;
  nlohmann::json j = {{"num_layers", a.num_layers},
          {"hidden_size", a.hidden_size},
          {"ffn_hidden_size", a.ffn_hidden_size},
          {"num_attention_heads", a.num_attention_heads},
          {"kv_channels", a.kv_channels},
          {"group_query_attention", a.num_query_groups != a.num_attention_heads},
          {"num_query_groups", a.num_query_groups},
          {"normalization", llama ? "RMSNorm" : "LayerNorm"},
          {"swiglu", a.swiglu},
          {"position_embedding_type", llama ? "rope" : "learned_absolute"},
          {"untie_embeddings_and_output_weights", a.untie_embeddings_and_output_weights},
          {"add_bias_linear", a.add_bias_linear},
          {"add_qkv_bias", a.add_qkv_bias},
          {"openai_gelu", false},
          {"bias_gelu_fusion", a.gelu_tanh},
          {"norm_epsilon", a.norm_epsilon},
          {"rotary_base", a.rotary_base},
          {"rotary_percent", 1.0},
          {"apply_layernorm_1p", false},
          {"max_position_embeddings", a.max_position_embeddings},
          {"seq_length", a.seq_length},
          {"padded_vocab_size", a.padded_vocab_size}};
  if (a.family == hf_family::deepseek_v3) deepseek_megatron_args(a, j);
  else if (a.family != hf_family::gpt2) llama_rope_megatron_args(a, j);
  if (a.family == hf_family::qwen3) j["qk_layernorm"] = true;
  if (a.family == hf_family::qwen3_moe) {
    j["qk_layernorm"] = true;
    moe_megatron_args(a, j);
    j["moe_router_score_function"] = "softmax";
  }
  if (a.family == hf_family::mixtral) {
    j["num_experts"] = a.num_experts;
    j["moe_layer_freq"] = 1;
    j["moe_ffn_hidden_size"] = a.moe_ffn_hidden_size;
    j["moe_router_topk"] = a.moe_router_topk;
    j["moe_router_pre_softmax"] = false;
    j["moe_router_score_function"] = "softmax";
    j["moe_router_load_balancing_type"] = "aux_loss";
    j["moe_aux_loss_coeff"] = a.moe_aux_loss_coeff;
    j["moe_shared_expert_intermediate_size"] = nullptr;
    j["moe_grouped_gemm"] = a.moe_grouped_gemm;
  }
  return j;
}

nlohmann::json hf_config_json(const model_args& a) {
  if (a.family == hf_family::deepseek_v3) return deepseek_config_json(a);
  if (a.family == hf_family::qwen3 || a.family == hf_family::qwen3_moe) return qwen3_config_json(a);
  if (a.family == hf_family::gpt2)
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", a.padded_vocab_size},
            {"n_positions", a.max_position_embeddings},
            {"n_ctx", a.max_position_embeddings},
            {"n_embd", a.hidden_size},
            {"n_layer", a.num_layers},
            {"n_head", a.num_attention_heads},
            {"n_inner", a.ffn_hidden_size},
            {"activation_function", a.gelu_tanh ? "gelu_new" : "gelu"},
            {"layer_norm_epsilon", a.norm_epsilon},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"scale_attn_weights", true},
            {"tie_word_embeddings", !a.untie_embeddings_and_output_weights},
            {"torch_dtype", "float32"}};
  auto j = llama_like_json(a);
  if (a.family == hf_family::mixtral) {
    j.update({{"architectures", {"MixtralForCausalLM"}},
              {"model_type", "mixtral"},
              {"intermediate_size", a.moe_ffn_hidden_size},
              {"sliding_window", nullptr},
              {"hidden_act", "silu"},
              {"attention_dropout", 0.0},
              {"num_local_experts", a.num_experts},
              {"num_experts_per_tok", a.moe_router_topk},
              {"output_router_logits", false},
              {"router_aux_loss_coef", a.moe_aux_loss_coeff},
              {"router_jitter_noise", 0.0}});
    return j;
  }
  j.update({{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"rope_scaling", llama_rope_scaling(a)},
            {"hidden_act", "silu"},
            {"attention_bias", a.qkv_bias()},
            {"mlp_bias", a.add_bias_linear},
            {"attention_dropout", 0.0}});
  return j;
}

model_args args_from_hf_config(const nlohmann::json& c) {
  const auto type = get_or<std::string>(c, "model_type", "");
  if (type == "deepseek_v3") return deepseek_from_hf_config(c);
  if (type == "qwen3" || type == "qwen3_moe") return qwen3_from_hf_config(c);
  model_args a;
  if (type == "gpt2") {
    a.family = hf_family::gpt2;
    a.num_layers = c.at("n_layer").get<int>();
    a.hidden_size = c.at("n_embd").get<int>();
    a.num_attention_heads = c.at("n_head").get<int>();
    a.ffn_hidden_size = get_or<int>(c, "n_inner", 4 * a.hidden_size);
    a.kv_channels = a.hidden_size / a.num_attention_heads;
    a.num_query_groups = a.num_attention_heads;
    a.max_position_embeddings = c.at("n_positions").get<int>();
    a.norm_epsilon = get_or<double>(c, "layer_norm_epsilon", 1e-5);
    const auto act = get_or<std::string>(c, "activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu")
      throw std::invalid_argument("config.json: activation_function " + act +
                                  " is not gelu_new, gelu_pytorch_tanh or gelu");
    a.gelu_tanh = act != "gelu";
    a.add_bias_linear = true;
  } else if (type == "llama") {
    a.family = hf_family::llama;
    read_llama_like(c, a, 1e-6, 10000.0);
    a.add_bias_linear = get_or<bool>(c, "mlp_bias", false);
    a.add_qkv_bias = get_or<bool>(c, "attention_bias", false) && !a.add_bias_linear;
    if (get_or<std::string>(c, "hidden_act", "silu") != "silu")
      throw std::invalid_argument("config.json: hidden_act must be silu for Megatron's swiglu");
    std::vector<std::string> errors;
    llama_rope_from_hf_config(c, a, errors);
    if (!errors.empty()) throw std::invalid_argument(join(errors, "config.json cannot be converted:"));
  } else if (type == "mixtral") {
    a.family = hf_family::mixtral;
    read_llama_like(c, a, 1e-5, 1e6);
    a.moe_ffn_hidden_size = a.ffn_hidden_size;
    a.num_experts = get_or<int>(c, "num_local_experts", 8);
    a.moe_router_topk = get_or<int>(c, "num_experts_per_tok", 2);
    a.moe_aux_loss_coeff = get_or<double>(c, "router_aux_loss_coef", 0.001);
    std::vector<std::string> errors;
    if (get_or<std::string>(c, "hidden_act", "silu") != "silu")
      errors.push_back("hidden_act must be silu for Megatron's swiglu");
    if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
      errors.push_back("rope_scaling (MixtralForCausalLM's rotary embedding in transformers ignores it)");
    if (c.contains("sliding_window") && !c["sliding_window"].is_null() &&
        c["sliding_window"].get<std::int64_t>() < a.max_position_embeddings)
      errors.push_back("sliding_window shorter than max_position_embeddings is not supported");
    if (get_or<double>(c, "router_jitter_noise", 0.0) != 0.0)
      errors.push_back("router_jitter_noise (noise on the experts' input) has no Megatron equivalent");
    if (a.num_experts < 1 || a.moe_router_topk < 1 || a.moe_router_topk > a.num_experts)
      errors.push_back("num_experts_per_tok must lie in [1, num_local_experts]");
    if (!errors.empty()) throw std::invalid_argument(join(errors, "config.json cannot be converted:"));
  } else {
    throw std::invalid_argument("config.json: model_type \"" + type +
                                "\" is not supported; use a gpt2, llama, mixtral, deepseek_v3, qwen3 or qwen3_moe model");
  }
  a.untie_embeddings_and_output_weights = !get_or<bool>(c, "tie_word_embeddings", type == "gpt2");
  a.padded_vocab_size = c.at("vocab_size").get<std::int64_t>();
  a.seq_length = a.max_position_embeddings;
  return a;
}

}  // namespace mactor::convert
