// Qwen3ForCausalLM / Qwen3MoeForCausalLM <-> Megatron args: Llama-style attention with per-head
// q/k RMSNorm (--qk-layernorm) and no biases; a dense SwiGLU MLP (Qwen3) or softmax top-k routing
// (norm_topk_prob unless --moe-router-pre-softmax), no shared experts, dense layers named by
// mlp_only_layers (Qwen3-MoE).
#include <algorithm>
#include <stdexcept>

#include "tools/convert_checkpoint/hf_llama_rope.hpp"
#include "tools/convert_checkpoint/hf_moe_families.hpp"

namespace mactor::convert {
namespace {

constexpr const char* moe_who = "Qwen3MoeForCausalLM";
constexpr const char* dense_who = "Qwen3ForCausalLM";

// The fields Qwen3Config and Qwen3MoeConfig share.
nlohmann::json qwen3_common_json(const model_args& a) {
  auto j = llama_like_json(a);
  j.update({{"rope_scaling", llama_rope_scaling(a)},
            {"use_sliding_window", false},
            {"sliding_window", nullptr},
            {"hidden_act", "silu"},
            {"attention_bias", false},
            {"attention_dropout", 0.0}});
  return j;
}

void qwen3_moe_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors) {
  const std::string who = moe_who, why = " (" + who + " cannot express it)";
  moe_common_from_megatron(args, a, errors, who);
  if (get_or<std::string>(args, "moe_router_score_function", "softmax") != "softmax")
    errors.push_back("moe_router_score_function other than softmax" + why);
  if (a.moe_router_topk_scaling_factor != 1.0) errors.push_back("moe_router_topk_scaling_factor != 1" + why);
  if (a.moe_shared_expert_intermediate_size > 0) errors.push_back("shared experts (moe_shared_expert_intermediate_size)" + why);
  if (a.moe_router_enable_expert_bias) errors.push_back("moe_router_enable_expert_bias" + why);
  if (a.moe_router_num_groups > 0 || a.moe_router_group_topk > 0)
    errors.push_back("group-limited routing (moe_router_num_groups, moe_router_group_topk)" + why);
}

void qwen3_moe_from_hf(const nlohmann::json& c, model_args& a, std::vector<std::string>& errors) {
  a.num_experts = c.at("num_experts").get<int>();
  a.moe_router_topk = c.at("num_experts_per_tok").get<int>();
  a.moe_ffn_hidden_size = c.at("moe_intermediate_size").get<int>();
  a.moe_router_pre_softmax = !get_or<bool>(c, "norm_topk_prob", false);
  a.moe_aux_loss_coeff = get_or<double>(c, "router_aux_loss_coef", 0.001);
  const int step = get_or<int>(c, "decoder_sparse_step", 1);
  const auto dense = get_or<std::vector<int>>(c, "mlp_only_layers", {});
  for (int i = 0; i < a.num_layers; ++i)
    a.moe_layers.push_back(std::find(dense.begin(), dense.end(), i) == dense.end() && step > 0 && (i + 1) % step == 0);
  if (a.num_experts < 1 || a.moe_router_topk < 1 || a.moe_router_topk > a.num_experts)
    errors.push_back("num_experts_per_tok must lie in [1, num_experts]");
}

}  // namespace

void qwen3_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors) {
  const std::size_t before = errors.size();
  const bool moe = get_or<int>(args, "num_experts", 0) > 0;
  const std::string who = moe ? moe_who : dense_who;
  if (a.family != hf_family::llama) errors.push_back(who + " needs the Llama style (RMSNorm, rope, swiglu)");
  a.qk_layernorm = true;
  if (moe) qwen3_moe_from_megatron(args, a, errors);
  else if (a.add_bias_linear || a.add_qkv_bias)
    errors.push_back("biases (add_bias_linear, add_qkv_bias): " + who + " as converted has none");
  if (errors.size() == before) a.family = moe ? hf_family::qwen3_moe : hf_family::qwen3;
}

nlohmann::json qwen3_config_json(const model_args& a) {
  auto j = qwen3_common_json(a);
  if (a.family == hf_family::qwen3) {
    j.update({{"architectures", {dense_who}}, {"model_type", "qwen3"}, {"max_window_layers", a.num_layers}});
    return j;
  }
  nlohmann::json dense = nlohmann::json::array();
  for (int i = 0; i < a.num_layers; ++i)
    if (!a.moe_layer(i)) dense.push_back(i);
  j.update({{"architectures", {moe_who}},
            {"model_type", "qwen3_moe"},
            {"moe_intermediate_size", a.moe_ffn_hidden_size},
            {"num_experts", a.num_experts},
            {"num_experts_per_tok", a.moe_router_topk},
            {"norm_topk_prob", !a.moe_router_pre_softmax},
            {"decoder_sparse_step", 1},
            {"mlp_only_layers", dense},
            {"router_aux_loss_coef", a.moe_aux_loss_coeff},
            {"output_router_logits", false}});
  return j;
}

model_args qwen3_from_hf_config(const nlohmann::json& c) {
  model_args a;
  const bool moe = get_or<std::string>(c, "model_type", "") == "qwen3_moe";
  a.family = moe ? hf_family::qwen3_moe : hf_family::qwen3;
  read_llama_like(c, a, 1e-6, 10000.0);
  a.qk_layernorm = true;
  std::vector<std::string> errors;
  if (moe) qwen3_moe_from_hf(c, a, errors);
  if (get_or<std::string>(c, "hidden_act", "silu") != "silu") errors.push_back("hidden_act must be silu for Megatron's swiglu");
  llama_rope_from_hf_config(c, a, errors);
  if (get_or<bool>(c, "use_sliding_window", false)) errors.push_back("use_sliding_window is not converted");
  if (get_or<bool>(c, "attention_bias", false)) errors.push_back("attention_bias is not converted");
  if (!errors.empty()) throw std::invalid_argument(join_errors(errors, "config.json cannot be converted:"));
  return a;
}

}  // namespace mactor::convert
