// The DeepseekV3ForCausalLM and Qwen3MoeForCausalLM model descriptions: which Megatron args they
// take (and refuse), their config.json and back (hf_deepseek_config.cpp, hf_qwen3_moe_config.cpp,
// with the MoE layer pattern and routing shared in hf_moe_args.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/convert_checkpoint/hf_config.hpp"

namespace mactor::convert {

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

/// head, then each error on its own indented line.
std::string join_errors(const std::vector<std::string>& errors, const std::string& head);
/// The routing no Hugging Face MoE family expresses (token dropping, probabilities on the
/// input, forced balancing), each refused with `why`.
void refuse_unconvertible_routing(const nlohmann::json& args, const std::string& why, std::vector<std::string>& errors);

/// The MoE args both families read (num_experts, topk, moe_ffn_hidden_size, grouped GEMM, the aux
/// coefficient, the layer pattern from moe_layer_freq, the routing), adding to errors what neither
/// expresses (capacity, jitter, forced balancing, probabilities on the input, biases). `who` names
/// the Hugging Face class in the messages.
void moe_common_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors,
                              const std::string& who);
/// The MoE args of a from-hf checkpoint (moe_layer_freq as the 0/1 list).
void moe_megatron_args(const model_args& a, nlohmann::json& j);

/// Multi-latent attention with (or without) MoE, Llama-style otherwise -> DeepseekV3ForCausalLM.
void deepseek_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors);
nlohmann::json deepseek_config_json(const model_args& a);
model_args deepseek_from_hf_config(const nlohmann::json& c);
void deepseek_megatron_args(const model_args& a, nlohmann::json& j);

/// --qk-layernorm with MoE, Llama-style otherwise -> Qwen3MoeForCausalLM.
void qwen3_moe_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors);
nlohmann::json qwen3_moe_config_json(const model_args& a);
model_args qwen3_moe_from_hf_config(const nlohmann::json& c);

/// The fields every Llama-like config.json carries (sizes, heads, rope base, norm eps, vocab).
void read_llama_like(const nlohmann::json& c, model_args& a, double default_eps, double default_theta);

}  // namespace mactor::convert
