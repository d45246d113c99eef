// DeepseekV3ForCausalLM <-> Megatron args: multi-latent attention (latent norms, RoPE or YaRN read
// as interleaved pairs, Megatron's MLA RoPE), MoE layers after the first k dense ones (or none: a
// dense model), sigmoid routing with the expert bias (e_score_correction_bias), shared experts and
// the top-k scaling.
#include <cmath>
#include <stdexcept>

#include "tools/convert_checkpoint/hf_moe_families.hpp"

namespace mactor::convert {
namespace {

constexpr const char* who = "DeepseekV3ForCausalLM";

// DeepseekV3's layers are [dense]*first_k_dense_replace + [MoE]*rest; nullopt for other patterns.
std::optional<int> first_k_dense(const model_args& a) {
  int k = 0;
  while (k < a.num_layers && !a.moe_layer(k)) ++k;
  for (int i = k; i < a.num_layers; ++i)
    if (!a.moe_layer(i)) return std::nullopt;
  return k;
}

void mla_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors) {
  a.q_lora_rank = get_or<int>(args, "q_lora_rank", 0);
  a.kv_lora_rank = get_or<int>(args, "kv_lora_rank", 32);
  a.qk_head_dim = get_or<int>(args, "qk_head_dim", 128);
  a.qk_pos_emb_head_dim = get_or<int>(args, "qk_pos_emb_head_dim", 64);
  a.v_head_dim = get_or<int>(args, "v_head_dim", 128);
  a.qk_layernorm = get_or<bool>(args, "qk_layernorm", false);
  if (!a.qk_layernorm)
    errors.push_back("multi_latent_attention without qk_layernorm has no latent norms, which " + std::string(who) +
                     " always applies; train with --qk-layernorm");
  yarn_from_megatron(args, a, errors);
  // DeepseekV3's q_a_layernorm and kv_a_layernorm use their default epsilon, 1e-6.
  if (std::abs(a.norm_epsilon - 1e-6) > 1e-15)
    errors.push_back("norm_epsilon " + std::to_string(a.norm_epsilon) + ": " + who +
                     "'s latent norms use 1e-6; train with --norm-epsilon 1e-6");
  if (a.num_query_groups != a.num_attention_heads)
    errors.push_back("group_query_attention with multi_latent_attention");
}

}  // namespace

void deepseek_from_megatron(const nlohmann::json& args, model_args& a, std::vector<std::string>& errors) {
  const std::size_t before = errors.size();
  if (a.family != hf_family::llama)
    errors.push_back(std::string(who) + " needs RMSNorm, swiglu and rope (or no) position embeddings");
  mla_from_megatron(args, a, errors);
  if (get_or<int>(args, "num_experts", 0) == 0) {  // every layer dense: first_k_dense_replace = num_layers
    if (a.add_bias_linear || a.add_qkv_bias)
      errors.push_back("biases (add_bias_linear, add_qkv_bias): " + std::string(who) + " has none");
    if (errors.size() == before) a.family = hf_family::deepseek_v3;
    return;
  }
  moe_common_from_megatron(args, a, errors, who);
  if (get_or<std::string>(args, "moe_router_score_function", "softmax") != "sigmoid")
    errors.push_back("moe_router_score_function softmax: " + std::string(who) +
                     " routes by sigmoid scores (--moe-router-score-function sigmoid)");
  const int shared = a.moe_shared_expert_intermediate_size, f = a.moe_ffn_hidden_size;
  if (shared <= 0 || shared % f != 0)
    errors.push_back("moe_shared_expert_intermediate_size must be a positive multiple of moe_ffn_hidden_size (" +
                     std::string(who) + " has n_shared_experts shared experts of moe_intermediate_size)");
  // Megatron scores a group by the sum of its top (topk / group_topk) scores, DeepseekV3 by its
  // top 2; DeepseekV3 masks the other groups' experts with 0 where Megatron excludes them, which
  // chooses alike while the biased scores of the chosen groups' experts are positive.
  const int groups = a.moe_router_num_groups, group_topk = a.moe_router_group_topk;
  if ((groups > 0 || group_topk > 0) &&
      (groups <= 0 || group_topk <= 0 || a.num_experts % groups != 0 || a.moe_router_topk != 2 * group_topk))
    errors.push_back("group-limited routing needs moe_router_topk == 2 * moe_router_group_topk and num_experts a "
                     "multiple of moe_router_num_groups (" + std::string(who) + " scores a group by its top 2)");
  if (!first_k_dense(a))
    errors.push_back("moe_layer_freq must make the first k layers dense and the rest MoE (" + std::string(who) +
                     "'s first_k_dense_replace)");
  if (errors.size() == before) a.family = hf_family::deepseek_v3;
}

namespace {

// The routing fields; a dense model writes neutral ones (first_k_dense_replace = num_layers
// leaves DeepseekV3 no MoE layer to read them).
nlohmann::json deepseek_moe_fields(const model_args& a) {
  if (a.num_experts == 0)
    return {{"moe_intermediate_size", a.ffn_hidden_size}, {"n_shared_experts", 0}, {"n_routed_experts", 0},
            {"num_experts_per_tok", 0}, {"routed_scaling_factor", 1.0}, {"norm_topk_prob", false},
            {"n_group", 1}, {"topk_group", 1}, {"first_k_dense_replace", a.num_layers}};
  return {{"moe_intermediate_size", a.moe_ffn_hidden_size},
          {"n_shared_experts", a.moe_shared_expert_intermediate_size / a.moe_ffn_hidden_size},
          {"n_routed_experts", a.num_experts},
          {"num_experts_per_tok", a.moe_router_topk},
          {"routed_scaling_factor", a.moe_router_topk_scaling_factor},
          {"norm_topk_prob", a.moe_router_topk > 1},  // Megatron's sigmoid normalizes k > 1 scores
          {"n_group", a.moe_router_num_groups > 0 ? a.moe_router_num_groups : 1},
          {"topk_group", a.moe_router_group_topk > 0 ? a.moe_router_group_topk : 1},
          {"first_k_dense_replace", *first_k_dense(a)}};
}

}  // namespace

nlohmann::json deepseek_config_json(const model_args& a) {
  nlohmann::json j = {{"architectures", {who}},
                      {"model_type", "deepseek_v3"},
                      {"vocab_size", a.padded_vocab_size},
                      {"hidden_size", a.hidden_size},
                      {"intermediate_size", a.ffn_hidden_size},
                      {"num_hidden_layers", a.num_layers},
                      {"num_attention_heads", a.num_attention_heads},
                      {"num_key_value_heads", a.num_attention_heads},
                      {"q_lora_rank", a.q_lora_rank ? nlohmann::json(a.q_lora_rank) : nlohmann::json(nullptr)},
                      {"kv_lora_rank", a.kv_lora_rank},
                      {"qk_nope_head_dim", a.qk_head_dim},
                      {"qk_rope_head_dim", a.qk_pos_emb_head_dim},
                      {"v_head_dim", a.v_head_dim},
                      {"rope_interleave", true},  // Megatron's MLA RoPE reads (x[2i], x[2i+1]) pairs
                      {"max_position_embeddings", a.max_position_embeddings},
                      {"rms_norm_eps", a.norm_epsilon},
                      {"rope_theta", a.rotary_base},
                      {"rope_scaling", yarn_rope_scaling(a)},
                      {"hidden_act", "silu"},
                      {"attention_bias", false},
                      {"attention_dropout", 0.0},
                      {"tie_word_embeddings", !a.untie_embeddings_and_output_weights},
                      {"torch_dtype", "float32"}};
  j.update(deepseek_moe_fields(a));
  return j;
}

namespace {

// The routed layers of a config.json whose first_k_dense_replace leaves some.
void deepseek_moe_from_hf(const nlohmann::json& c, int dense, model_args& a, std::vector<std::string>& errors) {
  a.num_experts = c.at("n_routed_experts").get<int>();
  a.moe_router_topk = c.at("num_experts_per_tok").get<int>();
  a.moe_ffn_hidden_size = c.at("moe_intermediate_size").get<int>();
  a.moe_shared_expert_intermediate_size = get_or<int>(c, "n_shared_experts", 0) * a.moe_ffn_hidden_size;
  a.moe_router_topk_scaling_factor = get_or<double>(c, "routed_scaling_factor", 1.0);
  a.moe_router_enable_expert_bias = true;  // the checkpoint's e_score_correction_bias
  for (int i = 0; i < a.num_layers; ++i) a.moe_layers.push_back(i >= dense);
  const int groups = get_or<int>(c, "n_group", 1), group_topk = get_or<int>(c, "topk_group", 1);
  if (group_topk < groups) {
    a.moe_router_num_groups = groups, a.moe_router_group_topk = group_topk;
    if (a.moe_router_topk != 2 * group_topk || a.num_experts % groups != 0)
      errors.push_back("group-limited routing needs num_experts_per_tok == 2 * topk_group (Megatron scores a group "
                       "by its top num_experts_per_tok / topk_group) and n_routed_experts a multiple of n_group");
  }
  if (get_or<bool>(c, "norm_topk_prob", true) != (a.moe_router_topk > 1))
    errors.push_back("norm_topk_prob must be true exactly when num_experts_per_tok > 1, as Megatron's sigmoid "
                     "routing normalizes");
  if (a.moe_shared_expert_intermediate_size == 0) errors.push_back("n_shared_experts must be positive");
  if (a.num_experts < 1 || a.moe_router_topk < 1 || a.moe_router_topk > a.num_experts)
    errors.push_back("num_experts_per_tok must lie in [1, n_routed_experts]");
}

}  // namespace

model_args deepseek_from_hf_config(const nlohmann::json& c) {
  model_args a;
  a.family = hf_family::deepseek_v3;
  read_llama_like(c, a, 1e-6, 10000.0);
  a.kv_channels = a.hidden_size / a.num_attention_heads;  // unused by multi-latent attention
  a.num_query_groups = a.num_attention_heads;
  a.qk_layernorm = true;
  a.q_lora_rank = get_or<int>(c, "q_lora_rank", 0);
  a.kv_lora_rank = c.at("kv_lora_rank").get<int>();
  a.qk_head_dim = c.at("qk_nope_head_dim").get<int>();
  a.qk_pos_emb_head_dim = c.at("qk_rope_head_dim").get<int>();
  a.v_head_dim = c.at("v_head_dim").get<int>();
  std::vector<std::string> errors;
  // DeepseekV3Config's default first_k_dense_replace is 3; at num_layers or more every layer is dense.
  const int dense = get_or<int>(c, "first_k_dense_replace", 3);
  if (dense < a.num_layers) deepseek_moe_from_hf(c, dense, a, errors);
  if (get_or<std::string>(c, "hidden_act", "silu") != "silu") errors.push_back("hidden_act must be silu for Megatron's swiglu");
  yarn_from_hf_config(c, a, errors);
  if (!get_or<bool>(c, "rope_interleave", true))
    errors.push_back("rope_interleave false: Megatron's MLA RoPE reads interleaved pairs");
  if (get_or<bool>(c, "attention_bias", false)) errors.push_back("attention_bias: Megatron's MLA has no biases");
  if (a.num_query_groups != get_or<int>(c, "num_key_value_heads", a.num_attention_heads))
    errors.push_back("num_key_value_heads must equal num_attention_heads");
  if (std::abs(a.norm_epsilon - 1e-6) > 1e-15)
    errors.push_back("rms_norm_eps must be 1e-6 (DeepseekV3's latent norms use 1e-6, Megatron one epsilon)");
  if (!errors.empty()) throw std::invalid_argument(join_errors(errors, "config.json cannot be converted:"));
  return a;
}

void deepseek_megatron_args(const model_args& a, nlohmann::json& j) {
  j["multi_latent_attention"] = true;
  j["q_lora_rank"] = a.q_lora_rank ? nlohmann::json(a.q_lora_rank) : nlohmann::json(nullptr);
  j["kv_lora_rank"] = a.kv_lora_rank;
  j["qk_head_dim"] = a.qk_head_dim;
  j["qk_pos_emb_head_dim"] = a.qk_pos_emb_head_dim;
  j["v_head_dim"] = a.v_head_dim;
  j["qk_layernorm"] = true;
  yarn_megatron_args(a, j);
  moe_megatron_args(a, j);
  if (a.num_experts == 0) return;
  j["moe_router_score_function"] = "sigmoid";
  j["moe_router_num_groups"] = a.moe_router_num_groups ? nlohmann::json(a.moe_router_num_groups) : nlohmann::json(nullptr);
  j["moe_router_group_topk"] = a.moe_router_group_topk ? nlohmann::json(a.moe_router_group_topk) : nlohmann::json(nullptr);
}

}  // namespace mactor::convert
