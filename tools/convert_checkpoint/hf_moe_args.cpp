// What DeepseekV3ForCausalLM and Qwen3MoeForCausalLM share: the MoE layer pattern, the routing
// settings neither expresses, and the Llama-like config.json fields.
#include <cmath>

#include "tools/convert_checkpoint/hf_moe_families.hpp"

namespace mactor::convert {
namespace {

// Megatron's moe_layer_freq: an int N (layers 0, N, 2N, ... are MoE) or one 0/1 per layer.
std::vector<bool> layer_pattern(const nlohmann::json& args, int num_layers, std::vector<std::string>& errors) {
  std::vector<bool> moe(std::size_t(num_layers), true);
  auto it = args.find("moe_layer_freq");
  if (it == args.end() || it->is_null()) return moe;
  if (it->is_number_integer() && it->get<int>() > 0) {
    for (int i = 0; i < num_layers; ++i) moe[std::size_t(i)] = i % it->get<int>() == 0;
    return moe;
  }
  if (it->is_array() && int(it->size()) == num_layers) {
    for (int i = 0; i < num_layers; ++i) moe[std::size_t(i)] = (*it)[std::size_t(i)].get<int>() != 0;
    return moe;
  }
  errors.push_back("moe_layer_freq " + it->dump() + " is neither a positive int nor one 0/1 per layer");
  return moe;
}

bool names_sinkhorn(const nlohmann::json& args) {
  auto it = args.find("moe_router_load_balancing_type");
  if (it == args.end() || it->is_null()) return false;
  if (it->is_string()) return it->get<std::string>() == "sinkhorn";
  for (const auto& t : *it)
    if (t == "sinkhorn") return true;
  return false;
}

}  // namespace

void refuse_unconvertible_routing(const nlohmann::json& args, const std::string& why, std::vector<std::string>& errors) {
  if (!get_or<nlohmann::json>(args, "moe_expert_capacity_factor", nullptr).is_null())
    errors.push_back("moe_expert_capacity_factor (token dropping)" + why);
  if (get_or<bool>(args, "moe_apply_probs_on_input", false))
    errors.push_back("moe_apply_probs_on_input (probabilities applied before the experts)" + why);
  if (get_or<bool>(args, "moe_router_force_load_balancing", false))
    errors.push_back("moe_router_force_load_balancing (random routing)" + why);
}

std::string join_errors(const std::vector<std::string>& errors, const std::string& head) {
  std::string s = head;
  for (const auto& e : errors) s += "\n  " + e;
  return s;
}

void moe_common_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors,
                              const std::string& who) {
  const std::string why = " (" + who + " cannot express it)";
  a.num_experts = get_or<int>(args, "num_experts", 0);
  a.moe_router_topk = get_or<int>(args, "moe_router_topk", 2);
  a.moe_ffn_hidden_size = get_or<int>(args, "moe_ffn_hidden_size", a.ffn_hidden_size);
  // The legacy GroupedMLP saves each expert under SequentialMLP's names.
  a.moe_grouped_gemm = get_or<bool>(args, "moe_grouped_gemm", false) && !get_or<bool>(args, "moe_use_legacy_grouped_gemm", false);
  a.moe_router_pre_softmax = get_or<bool>(args, "moe_router_pre_softmax", false);
  a.moe_router_topk_scaling_factor = get_or<double>(args, "moe_router_topk_scaling_factor", 1.0);
  a.moe_shared_expert_intermediate_size = get_or<int>(args, "moe_shared_expert_intermediate_size", 0);
  a.moe_router_enable_expert_bias = get_or<bool>(args, "moe_router_enable_expert_bias", false);
  a.moe_router_num_groups = get_or<int>(args, "moe_router_num_groups", 0);
  a.moe_router_group_topk = get_or<int>(args, "moe_router_group_topk", 0);
  a.moe_layers = layer_pattern(args, a.num_layers, errors);
  if (a.num_experts > 0 && (a.moe_router_topk < 1 || a.moe_router_topk > a.num_experts))
    errors.push_back("moe_router_topk must lie in [1, num_experts]");
  if (names_sinkhorn(args)) errors.push_back("moe_router_load_balancing_type sinkhorn (Sinkhorn routing)" + why);
  refuse_unconvertible_routing(args, why, errors);
  if (!get_or<nlohmann::json>(args, "moe_input_jitter_eps", nullptr).is_null())
    errors.push_back("moe_input_jitter_eps (noise on the router's input)" + why);
  if (a.add_bias_linear || a.add_qkv_bias)
    errors.push_back("biases (add_bias_linear, add_qkv_bias): " + who + " as converted has none");
  auto coeff = args.find("moe_aux_loss_coeff");
  if (coeff == args.end() || coeff->is_null()) a.moe_aux_loss_coeff = 0.0;
  else if (coeff->is_number()) a.moe_aux_loss_coeff = coeff->get<double>();
  else if (coeff->is_array() && coeff->size() == 1) a.moe_aux_loss_coeff = (*coeff)[0].get<double>();
  else errors.push_back("moe_aux_loss_coeff has several values (one per load-balancing type)" + why);
}

void moe_megatron_args(const model_args& a, nlohmann::json& j) {
  if (a.num_experts == 0) return;
  nlohmann::json pattern = nlohmann::json::array();
  for (int i = 0; i < a.num_layers; ++i) pattern.push_back(a.moe_layer(i) ? 1 : 0);
  j["num_experts"] = a.num_experts;
  j["moe_layer_freq"] = pattern;
  j["moe_ffn_hidden_size"] = a.moe_ffn_hidden_size;
  j["moe_router_topk"] = a.moe_router_topk;
  j["moe_router_pre_softmax"] = a.moe_router_pre_softmax;
  j["moe_router_topk_scaling_factor"] =
      a.moe_router_topk_scaling_factor == 1.0 ? nlohmann::json(nullptr) : nlohmann::json(a.moe_router_topk_scaling_factor);
  j["moe_router_load_balancing_type"] = "aux_loss";
  j["moe_aux_loss_coeff"] = a.moe_aux_loss_coeff;
  j["moe_shared_expert_intermediate_size"] =
      a.moe_shared_expert_intermediate_size ? nlohmann::json(a.moe_shared_expert_intermediate_size) : nlohmann::json(nullptr);
  j["moe_router_enable_expert_bias"] = a.moe_router_enable_expert_bias;
  j["moe_grouped_gemm"] = a.moe_grouped_gemm;
}

nlohmann::json llama_like_json(const model_args& a) {
  return {{"vocab_size", a.padded_vocab_size},
          {"hidden_size", a.hidden_size},
          {"intermediate_size", a.ffn_hidden_size},
          {"num_hidden_layers", a.num_layers},
          {"num_attention_heads", a.num_attention_heads},
          {"num_key_value_heads", a.num_query_groups},
          {"head_dim", a.kv_channels},
          {"max_position_embeddings", a.max_position_embeddings},
          {"rms_norm_eps", a.norm_epsilon},
          {"rope_theta", a.rotary_base},
          {"tie_word_embeddings", !a.untie_embeddings_and_output_weights},
          {"torch_dtype", "float32"}};
}

void read_llama_like(const nlohmann::json& c, model_args& a, double default_eps, double default_theta) {
  a.num_layers = c.at("num_hidden_layers").get<int>();
  a.hidden_size = c.at("hidden_size").get<int>();
  a.num_attention_heads = c.at("num_attention_heads").get<int>();
  a.ffn_hidden_size = c.at("intermediate_size").get<int>();
  a.kv_channels = get_or<int>(c, "head_dim", a.hidden_size / a.num_attention_heads);
  a.num_query_groups = get_or<int>(c, "num_key_value_heads", a.num_attention_heads);
  a.max_position_embeddings = c.at("max_position_embeddings").get<int>();
  a.norm_epsilon = get_or<double>(c, "rms_norm_eps", default_eps);
  a.rotary_base = get_or<double>(c, "rope_theta", default_theta);
  a.swiglu = true;
  a.gelu_tanh = false;
  a.add_bias_linear = false;
  a.padded_vocab_size = c.at("vocab_size").get<std::int64_t>();
  a.untie_embeddings_and_output_weights = !get_or<bool>(c, "tie_word_embeddings", false);
  a.seq_length = a.max_position_embeddings;
}

}  // namespace mactor::convert
