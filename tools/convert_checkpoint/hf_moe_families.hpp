// The DeepseekV3ForCausalLM, Qwen3ForCausalLM and Qwen3MoeForCausalLM model descriptions: which
// Megatron args they take (and refuse), their config.json and back (hf_deepseek_config.cpp with
// its YaRN rope_scaling in hf_yarn_rope.cpp, hf_qwen3_config.cpp, with the MoE layer pattern and
// routing shared in hf_moe_args.cpp).
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

/// Multi-latent attention with or without MoE, Llama-style otherwise -> DeepseekV3ForCausalLM (a
/// dense model: first_k_dense_replace = num_layers).
void deepseek_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors);
nlohmann::json deepseek_config_json(const model_args& a);
model_args deepseek_from_hf_config(const nlohmann::json& c);
void deepseek_megatron_args(const model_args& a, nlohmann::json& j);

/// Multi-latent attention's rope_type and YaRN settings (a.yarn, factor, mscale, mscale_all_dim),
/// adding to errors what DeepseekV3's rope_scaling cannot express.
void yarn_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors);
/// DeepseekV3's rope_scaling: null for plain RoPE, else the yarn dict.
nlohmann::json yarn_rope_scaling(const model_args& a);
/// The inverse of yarn_rope_scaling (c is the whole config.json), adding to errors what Megatron's
/// YaRN cannot compute.
void yarn_from_hf_config(const nlohmann::json& c, model_args& a, std::vector<std::string>& errors);
/// rope_type, rotary_scaling_factor, mscale, mscale_all_dim of a from-hf checkpoint.
void yarn_megatron_args(const model_args& a, nlohmann::json& j);

/// --qk-layernorm, Llama-style otherwise -> Qwen3ForCausalLM (dense) or Qwen3MoeForCausalLM (MoE).
void qwen3_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors);
nlohmann::json qwen3_config_json(const model_args& a);
/// model_type qwen3 or qwen3_moe.
model_args qwen3_from_hf_config(const nlohmann::json& c);

/// The fields every Llama-like config.json carries (sizes, heads, rope base, norm eps, vocab).
void read_llama_like(const nlohmann::json& c, model_args& a, double default_eps, double default_theta);
/// Those fields written (intermediate_size = ffn_hidden_size, the tie flag, fp32 weights): each
/// family adds its own on top.
nlohmann::json llama_like_json(const model_args& a);

}  // namespace mactor::convert
