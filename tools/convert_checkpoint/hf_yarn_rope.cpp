// Multi-latent attention's YaRN rotary embedding <-> DeepseekV3's rope_scaling. Megatron
// (YarnRotaryEmbedding, MLASelfAttention) and transformers (_compute_yarn_parameters,
// DeepseekV3Attention) compute the same frequencies, cos/sin factor m(f, mscale) / m(f, mscale_all_dim)
// and softmax scale m(f, mscale_all_dim)^2 / sqrt(q_head_dim) when
//   - original_max_position_embeddings, beta_fast and beta_slow are Megatron's fixed 4096, 32, 1;
//   - max_position_embeddings == factor * original_max_position_embeddings: some transformers
//     versions replace `factor` by that ratio when original_max_position_embeddings is given;
//   - mscale and mscale_all_dim are both non-zero, or mscale is 1: transformers takes m(f, 1) for
//     the cos/sin factor unless both are set.
#include <cmath>
#include <string>

#include "tools/convert_checkpoint/hf_moe_families.hpp"

namespace mactor::convert {
namespace {

constexpr int original_max_positions = 4096;  // MLATransformerConfig's defaults, no Megatron flags
constexpr double beta_fast = 32, beta_slow = 1;

std::string number(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// The rules above that both directions check; `factor`, `mscale` name the fields in messages.
void check_expressible(const model_args& a, const std::string& factor, const std::string& mscale,
                       const std::string& max_positions, std::vector<std::string>& errors) {
  if (a.rotary_scaling_factor < 1)
    errors.push_back(factor + " " + number(a.rotary_scaling_factor) + " < 1: YaRN only stretches");
  if (std::abs(a.max_position_embeddings - a.rotary_scaling_factor * original_max_positions) > 1e-9)
    errors.push_back(max_positions + " " + std::to_string(a.max_position_embeddings) + " must equal " + factor +
                     " * 4096 = " + number(a.rotary_scaling_factor * original_max_positions) +
                     " (transformers derives the YaRN factor from max_position_embeddings / "
                     "original_max_position_embeddings, which Megatron fixes at 4096)");
  if (a.mscale != 1.0 && (a.mscale == 0.0 || a.mscale_all_dim == 0.0))
    errors.push_back(mscale + " " + number(a.mscale) + " with mscale_all_dim " + number(a.mscale_all_dim) +
                     ": transformers applies mscale only when both are non-zero; use 1, or set both");
}

}  // namespace

void yarn_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors) {
  // rope_type unset is MLATransformerConfig's default, yarn.
  const auto type = get_or<std::string>(args, "rope_type", "yarn");
  a.rotary_scaling_factor = get_or<double>(args, "rotary_scaling_factor", 1.0);
  a.mscale = get_or<double>(args, "mscale", 1.0);
  a.mscale_all_dim = get_or<double>(args, "mscale_all_dim", 0.0);
  if (a.rotary_scaling_factor == 1.0) return;  // plain RoPE and a softmax scale of 1/sqrt(d) either way
  if (type != "yarn") {
    // Plain RoPE frequencies, but Megatron still scales the softmax by m(factor, mscale_all_dim)^2.
    if (a.mscale_all_dim != 0.0)
      errors.push_back("rope_type rope with rotary_scaling_factor " + number(a.rotary_scaling_factor) +
                       " and mscale_all_dim " + number(a.mscale_all_dim) +
                       " scales the softmax without YaRN frequencies, which DeepseekV3 cannot express; "
                       "use --rope-type yarn or --mscale-all-dim 0");
    return;
  }
  a.yarn = true;
  check_expressible(a, "rotary_scaling_factor", "mscale", "max_position_embeddings", errors);
}

nlohmann::json yarn_rope_scaling(const model_args& a) {
  if (!a.yarn) return nullptr;
  return {{"type", "yarn"},
          {"rope_type", "yarn"},
          {"factor", a.rotary_scaling_factor},
          {"original_max_position_embeddings", original_max_positions},
          {"beta_fast", beta_fast},
          {"beta_slow", beta_slow},
          {"mscale", a.mscale},
          {"mscale_all_dim", a.mscale_all_dim}};
}

void yarn_from_hf_config(const nlohmann::json& c, model_args& a, std::vector<std::string>& errors) {
  auto it = c.find("rope_scaling");
  if (it == c.end() || it->is_null()) return;
  const auto& r = *it;
  const auto type = get_or<std::string>(r, "rope_type", get_or<std::string>(r, "type", ""));
  if (type != "yarn") {
    errors.push_back("rope_scaling of type \"" + type + "\": only yarn is converted");
    return;
  }
  a.rotary_scaling_factor = get_or<double>(r, "factor", 1.0);
  a.mscale = get_or<double>(r, "mscale", 1.0);
  a.mscale_all_dim = get_or<double>(r, "mscale_all_dim", 0.0);
  if (a.rotary_scaling_factor == 1.0) return;  // plain RoPE whatever the rest says
  a.yarn = true;
  if (get_or<int>(r, "original_max_position_embeddings", original_max_positions) != original_max_positions)
    errors.push_back("rope_scaling.original_max_position_embeddings must be 4096 (Megatron has no flag for it)");
  if (get_or<double>(r, "beta_fast", beta_fast) != beta_fast || get_or<double>(r, "beta_slow", beta_slow) != beta_slow)
    errors.push_back("rope_scaling.beta_fast and beta_slow must be 32 and 1 (Megatron has no flags for them)");
  if (r.contains("attention_factor") && !r["attention_factor"].is_null())
    errors.push_back("rope_scaling.attention_factor: Megatron derives the factor from mscale and mscale_all_dim");
  if (!get_or<bool>(r, "truncate", true))
    errors.push_back("rope_scaling.truncate false: Megatron rounds the correction range");
  check_expressible(a, "rope_scaling.factor", "rope_scaling.mscale", "max_position_embeddings", errors);
}

void yarn_megatron_args(const model_args& a, nlohmann::json& j) {
  j["rope_type"] = a.yarn ? "yarn" : "rope";
  j["rotary_scaling_factor"] = a.yarn ? a.rotary_scaling_factor : 1.0;
  j["mscale"] = a.yarn ? a.mscale : 1.0;
  j["mscale_all_dim"] = a.yarn ? a.mscale_all_dim : 0.0;
}

}  // namespace mactor::convert
