// Llama-style RoPE scaling <-> rope_scaling in config.json (LlamaForCausalLM, Qwen3 and Qwen3-MoE):
// --use-rope-scaling with --rope-scaling-factor is Llama 3.1's frequency scaling, rope_type
// "llama3" with Megatron's fixed low_freq_factor 1, high_freq_factor 4 and
// original_max_position_embeddings 8192 (RotaryEmbedding._apply_scaling has no flags for them);
// --rotary-seq-len-interpolation-factor divides the positions, rope_type "linear". Megatron's
// --no-rope-freq (layers without RoPE) has no equivalent there.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/convert_checkpoint/hf_config.hpp"

namespace mactor::convert {

/// From the checkpoint's args into a.llama3_rope_factor / a.linear_rope_factor; what config.json
/// cannot express (both at once, --no-rope-freq, or either for `who` = MixtralForCausalLM, whose
/// rotary embedding in transformers ignores rope_scaling) goes to errors.
void llama_rope_from_megatron(const nlohmann::json& args, model_args& a, const std::string& who,
                              std::vector<std::string>& errors);
/// config.json's rope_scaling: null, the llama3 dict or the linear one.
nlohmann::json llama_rope_scaling(const model_args& a);
/// The inverse (c: the whole config.json); a rope_type or a setting Megatron cannot express goes to errors.
void llama_rope_from_hf_config(const nlohmann::json& c, model_args& a, std::vector<std::string>& errors);
/// The Megatron args of a's scaling (use_rope_scaling, rope_scaling_factor,
/// rotary_seq_len_interpolation_factor).
void llama_rope_megatron_args(const model_args& a, nlohmann::json& j);

}  // namespace mactor::convert
