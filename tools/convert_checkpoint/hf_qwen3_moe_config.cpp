// Qwen3MoeForCausalLM <-> Megatron args: Llama-style attention with per-head q/k RMSNorm
// (--qk-layernorm), softmax top-k routing (norm_topk_prob unless --moe-router-pre-softmax), no
// shared experts, dense layers named by mlp_only_layers.
#include <algorithm>
#include <stdexcept>

#include "tools/convert_checkpoint/hf_moe_families.hpp"

namespace mactor::convert {
namespace {
constexpr const char* who = "Qwen3MoeForCausalLM";
}  // namespace

void qwen3_moe_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors) {
  const std::size_t before = errors.size();
  const std::string why = std::string(" (") + who + " cannot express it)";
  if (a.family != hf_family::llama) errors.push_back(std::string(who) + " needs the Llama style (RMSNorm, rope, swiglu)");
  a.qk_layernorm = true;
  moe_common_from_megatron(args, a, errors, who);
  if (get_or<std::string>(args, "moe_router_score_function", "softmax") != "softmax")
    errors.push_back("moe_router_score_function other than softmax" + why);
  if (a.moe_router_topk_scaling_factor != 1.0) errors.push_back("moe_router_topk_scaling_factor != 1" + why);
  if (a.moe_shared_expert_intermediate_size > 0) errors.push_back("shared experts (moe_shared_expert_intermediate_size)" + why);
  if (a.moe_router_enable_expert_bias) errors.push_back("moe_router_enable_expert_bias" + why);
  if (a.moe_router_num_groups > 0 || a.moe_router_group_topk > 0)
    errors.push_back("group-limited routing (moe_router_num_groups, moe_router_group_topk)" + why);
  if (errors.size() == before) a.family = hf_family::qwen3_moe;
}

nlohmann::json qwen3_moe_config_json(const model_args& a) {
  nlohmann::json dense = nlohmann::json::array();
  for (int i = 0; i < a.num_layers; ++i)
    if (!a.moe_layer(i)) dense.push_back(i);
  return {{"architectures", {who}},
          {"model_type", "qwen3_moe"},
          {"vocab_size", a.padded_vocab_size},
          {"hidden_size", a.hidden_size},
          {"intermediate_size", a.ffn_hidden_size},
          {"moe_intermediate_size", a.moe_ffn_hidden_size},
          {"num_hidden_layers", a.num_layers},
          {"num_attention_heads", a.num_attention_heads},
          {"num_key_value_heads", a.num_query_groups},
          {"head_dim", a.kv_channels},
          {"num_experts", a.num_experts},
          {"num_experts_per_tok", a.moe_router_topk},
          {"norm_topk_prob", !a.moe_router_pre_softmax},
          {"decoder_sparse_step", 1},
          {"mlp_only_layers", dense},
          {"router_aux_loss_coef", a.moe_aux_loss_coeff},
          {"output_router_logits", false},
          {"max_position_embeddings", a.max_position_embeddings},
          {"rms_norm_eps", a.norm_epsilon},
          {"rope_theta", a.rotary_base},
          {"rope_scaling", nullptr},
          {"use_sliding_window", false},
          {"sliding_window", nullptr},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"tie_word_embeddings", !a.untie_embeddings_and_output_weights},
          {"torch_dtype", "float32"}};
}

model_args qwen3_moe_from_hf_config(const nlohmann::json& c) {
  model_args a;
  a.family = hf_family::qwen3_moe;
  read_llama_like(c, a, 1e-6, 10000.0);
  a.qk_layernorm = true;
  a.num_experts = c.at("num_experts").get<int>();
  a.moe_router_topk = c.at("num_experts_per_tok").get<int>();
  a.moe_ffn_hidden_size = c.at("moe_intermediate_size").get<int>();
  a.moe_router_pre_softmax = !get_or<bool>(c, "norm_topk_prob", false);
  a.moe_aux_loss_coeff = get_or<double>(c, "router_aux_loss_coef", 0.001);
  const int step = get_or<int>(c, "decoder_sparse_step", 1);
  const auto dense = get_or<std::vector<int>>(c, "mlp_only_layers", {});
  for (int i = 0; i < a.num_layers; ++i)
    a.moe_layers.push_back(std::find(dense.begin(), dense.end(), i) == dense.end() && step > 0 && (i + 1) % step == 0);
  std::vector<std::string> errors;
  if (get_or<std::string>(c, "hidden_act", "silu") != "silu") errors.push_back("hidden_act must be silu for Megatron's swiglu");
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null()) errors.push_back("rope_scaling is not supported by mactor's model");
  if (get_or<bool>(c, "use_sliding_window", false)) errors.push_back("use_sliding_window is not converted");
  if (get_or<bool>(c, "attention_bias", false)) errors.push_back("attention_bias is not converted");
  if (a.num_experts < 1 || a.moe_router_topk < 1 || a.moe_router_topk > a.num_experts)
    errors.push_back("num_experts_per_tok must lie in [1, num_experts]");
  if (!errors.empty()) throw std::invalid_argument(join_errors(errors, "config.json cannot be converted:"));
  return a;
}

}  // namespace mactor::convert
