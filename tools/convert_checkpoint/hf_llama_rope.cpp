// Llama 3.1 and linear RoPE scaling between Megatron's args and config.json's rope_scaling.
#include "tools/convert_checkpoint/hf_llama_rope.hpp"

#include <cmath>

namespace mactor::convert {
namespace {

// RotaryEmbedding._apply_scaling's fixed values (Megatron has no flags for them).
constexpr double low_freq_factor = 1, high_freq_factor = 4;
constexpr int original_max_positions = 8192;

double number_or(const nlohmann::json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<double>();
}

}  // namespace

void llama_rope_from_megatron(const nlohmann::json& args, model_args& a, const std::string& who,
                              std::vector<std::string>& errors) {
  if (args.value("use_rope_scaling", false)) a.llama3_rope_factor = number_or(args, "rope_scaling_factor", 8.0);
  a.linear_rope_factor = number_or(args, "rotary_seq_len_interpolation_factor", 1.0);
  const bool scaled = a.llama3_rope_factor > 0 || a.linear_rope_factor != 1.0;
  if (a.llama3_rope_factor > 0 && a.linear_rope_factor != 1.0)
    errors.push_back("use_rope_scaling together with rotary_seq_len_interpolation_factor (rope_scaling holds one of them)");
  if (scaled && who == "MixtralForCausalLM")
    errors.push_back("use_rope_scaling or rotary_seq_len_interpolation_factor (MixtralForCausalLM's rotary embedding "
                     "ignores rope_scaling)");
  const auto nope = args.find("no_rope_freq");
  if (nope != args.end() && !nope->is_null())
    errors.push_back("no_rope_freq (layers without RoPE) has no " + who + " equivalent");
}

nlohmann::json llama_rope_scaling(const model_args& a) {
  if (a.llama3_rope_factor > 0)
    return {{"rope_type", "llama3"},
            {"factor", a.llama3_rope_factor},
            {"low_freq_factor", low_freq_factor},
            {"high_freq_factor", high_freq_factor},
            {"original_max_position_embeddings", original_max_positions}};
  if (a.linear_rope_factor != 1.0) return {{"rope_type", "linear"}, {"factor", a.linear_rope_factor}};
  return nullptr;
}

void llama_rope_from_hf_config(const nlohmann::json& c, model_args& a, std::vector<std::string>& errors) {
  const auto it = c.find("rope_scaling");
  if (it == c.end() || it->is_null()) return;
  const auto& r = *it;
  // transformers reads "rope_type", or "type" in older configs.
  const std::string type = r.value("rope_type", r.value("type", std::string()));
  const double factor = number_or(r, "factor", 0.0);
  if (!(factor > 0)) {
    errors.push_back("rope_scaling.factor must be a positive number");
    return;
  }
  if (type == "linear") {
    a.linear_rope_factor = factor;
    return;
  }
  if (type != "llama3") {
    errors.push_back("rope_scaling of type \"" + type + "\": llama3 and linear are converted (Megatron's "
                     "--use-rope-scaling and --rotary-seq-len-interpolation-factor)");
    return;
  }
  if (number_or(r, "low_freq_factor", low_freq_factor) != low_freq_factor ||
      number_or(r, "high_freq_factor", high_freq_factor) != high_freq_factor ||
      number_or(r, "original_max_position_embeddings", original_max_positions) != original_max_positions)
    errors.push_back("rope_scaling llama3 with low_freq_factor, high_freq_factor or original_max_position_embeddings "
                     "other than 1, 4 and 8192 (Megatron's --use-rope-scaling has fixed values)");
  a.llama3_rope_factor = factor;
}

void llama_rope_megatron_args(const model_args& a, nlohmann::json& j) {
  j["use_rope_scaling"] = a.llama3_rope_factor > 0;
  j["rope_scaling_factor"] = a.llama3_rope_factor > 0 ? a.llama3_rope_factor : 8.0;
  j["rotary_seq_len_interpolation_factor"] =
      a.linear_rope_factor != 1.0 ? nlohmann::json(a.linear_rope_factor) : nlohmann::json(nullptr);
}

}  // namespace mactor::convert
