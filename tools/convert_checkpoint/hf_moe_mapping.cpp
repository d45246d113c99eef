// A DeepseekV3 / Qwen3-MoE layer's MLP block <-> Megatron's: a dense SwiGLU MLP (fc1 rows
// [gate; up]) as mlp.{gate,up,down}_proj; a MoE layer's router as mlp.gate, each routed expert
// as mlp.experts.<e>.{gate,up,down}_proj, DeepseekV3's shared experts (one SwiGLU MLP of
// moe_shared_expert_intermediate_size) as mlp.shared_experts.* and its router's expert bias as
// mlp.gate.e_score_correction_bias (zeros when the Megatron model has none).
#include "tools/convert_checkpoint/hf_layer_mapping.hpp"

namespace mactor::convert {
namespace {

// A SwiGLU MLP: Megatron's fc1 [2f, h] and fc2 [h, f] under prefix mine, Hugging Face's
// gate/up/down_proj under theirs.
void swiglu_parameters(const model_args& a, const std::string& fc1, const std::string& fc2, std::int64_t f,
                       parameter_list& p) {
  p.push_back({fc1, {2 * f, a.hidden_size}});
  p.push_back({fc2, {a.hidden_size, f}});
}

void swiglu_to_hf(const dense_tensor& fc1, const dense_tensor& fc2, std::int64_t f, const std::string& theirs,
                  tensor_map& hf) {
  hf[theirs + "gate_proj.weight"] = rows(fc1, 0, f);
  hf[theirs + "up_proj.weight"] = rows(fc1, f, 2 * f);
  hf[theirs + "down_proj.weight"] = fc2;
}

void swiglu_from_hf(const model_args& a, const std::string& theirs, std::int64_t f, const hf_getter& get,
                    const std::string& fc1, const std::string& fc2, tensor_map& m) {
  const std::int64_t h = a.hidden_size;
  m[fc1] = concat_rows({&get(theirs + "gate_proj.weight", {f, h}), &get(theirs + "up_proj.weight", {f, h})});
  m[fc2] = get(theirs + "down_proj.weight", {h, f});
}

bool has_shared(const model_args& a) { return a.moe_shared_expert_intermediate_size > 0; }
bool writes_bias(const model_args& a) { return a.family == hf_family::deepseek_v3; }

}  // namespace

void mlp_block_parameters(const model_args& a, int i, parameter_list& p) {
  const std::string l = layer(i);
  if (!a.moe_layer(i)) return swiglu_parameters(a, l + "mlp.linear_fc1.weight", l + "mlp.linear_fc2.weight", a.ffn_hidden_size, p);
  p.push_back({l + "mlp.router.weight", {a.num_experts, a.hidden_size}});
  if (a.moe_router_enable_expert_bias) p.push_back({l + "mlp.router.expert_bias", {a.num_experts}});
  for (int e = 0; e < a.num_experts; ++e)
    swiglu_parameters(a, expert_weight(a, l, e, 1), expert_weight(a, l, e, 2), a.moe_ffn_hidden_size, p);
  if (has_shared(a))
    swiglu_parameters(a, l + "mlp.shared_experts.linear_fc1.weight", l + "mlp.shared_experts.linear_fc2.weight",
                      a.moe_shared_expert_intermediate_size, p);
}

void mlp_block_to_hf(const model_args& a, int i, const megatron_getter& get, tensor_map& hf) {
  const std::string l = layer(i), o = hf_layer(i) + "mlp.";
  if (!a.moe_layer(i))
    return swiglu_to_hf(get(l + "mlp.linear_fc1.weight"), get(l + "mlp.linear_fc2.weight"), a.ffn_hidden_size, o, hf);
  hf[o + "gate.weight"] = get(l + "mlp.router.weight");
  if (writes_bias(a))
    hf[o + "gate.e_score_correction_bias"] =
        a.moe_router_enable_expert_bias ? get(l + "mlp.router.expert_bias") : zeros(a.num_experts);
  for (int e = 0; e < a.num_experts; ++e)
    swiglu_to_hf(get(expert_weight(a, l, e, 1)), get(expert_weight(a, l, e, 2)), a.moe_ffn_hidden_size,
                 o + "experts." + std::to_string(e) + ".", hf);
  if (has_shared(a))
    swiglu_to_hf(get(l + "mlp.shared_experts.linear_fc1.weight"), get(l + "mlp.shared_experts.linear_fc2.weight"),
                 a.moe_shared_expert_intermediate_size, o + "shared_experts.", hf);
}

void mlp_block_from_hf(const model_args& a, int i, const hf_getter& get, tensor_map& m) {
  const std::string l = layer(i), o = hf_layer(i) + "mlp.";
  if (!a.moe_layer(i))
    return swiglu_from_hf(a, o, a.ffn_hidden_size, get, l + "mlp.linear_fc1.weight", l + "mlp.linear_fc2.weight", m);
  m[l + "mlp.router.weight"] = get(o + "gate.weight", {a.num_experts, a.hidden_size});
  if (writes_bias(a)) {
    const auto& bias = get(o + "gate.e_score_correction_bias", {a.num_experts});
    if (a.moe_router_enable_expert_bias) m[l + "mlp.router.expert_bias"] = bias;
    else require_zero(bias, o + "gate.e_score_correction_bias");
  }
  for (int e = 0; e < a.num_experts; ++e)
    swiglu_from_hf(a, o + "experts." + std::to_string(e) + ".", a.moe_ffn_hidden_size, get,
                   expert_weight(a, l, e, 1), expert_weight(a, l, e, 2), m);
  if (has_shared(a))
    swiglu_from_hf(a, o + "shared_experts.", a.moe_shared_expert_intermediate_size, get,
                   l + "mlp.shared_experts.linear_fc1.weight", l + "mlp.shared_experts.linear_fc2.weight", m);
}

}  // namespace mactor::convert
