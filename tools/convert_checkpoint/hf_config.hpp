// The model description shared by both conversion directions: read from the checkpoint's common
// "args" (Megatron's argparse dest names) or from a Hugging Face config.json, and written as either.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mactor::convert {

// GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM, DeepseekV3ForCausalLM (multi-latent
// attention, dense or sigmoid-routed MoE with shared experts), Qwen3ForCausalLM (qk-layernorm,
// dense) and Qwen3MoeForCausalLM (qk-layernorm, MoE).
enum class hf_family { gpt2, llama, mixtral, deepseek_v3, qwen3, qwen3_moe };

struct model_args {
  hf_family family = hf_family::gpt2;
  int num_layers = 0;
  int hidden_size = 0;
  int ffn_hidden_size = 0;
  int num_attention_heads = 0;
  int kv_channels = 0;       // resolved: hidden_size / num_attention_heads when unset
  int num_query_groups = 0;  // resolved: num_attention_heads without GQA
  bool swiglu = false;
  bool untie_embeddings_and_output_weights = false;
  bool add_bias_linear = true;
  bool add_qkv_bias = false;
  bool gelu_tanh = true;  // Megatron's bias-gelu fusion / --openai-gelu: HF "gelu_new"
  double norm_epsilon = 1e-5;
  double rotary_base = 10000;
  int max_position_embeddings = 0;
  int seq_length = 0;
  std::int64_t padded_vocab_size = 0;
  // Mixtral (every layer MoE): Megatron's --num-experts, --moe-router-topk, --moe-ffn-hidden-size,
  // --moe-grouped-gemm (the experts' parameter names) and --moe-aux-loss-coeff.
  int num_experts = 0;
  int moe_router_topk = 0;
  int moe_ffn_hidden_size = 0;
  bool moe_grouped_gemm = false;
  double moe_aux_loss_coeff = 0.0;
  // DeepseekV3 and Qwen3-MoE: per layer whether it is MoE (Megatron's moe_layer_freq; the others
  // dense with ffn_hidden_size), the routing, shared experts and the expert bias.
  std::vector<bool> moe_layers;
  bool moe_router_pre_softmax = false;     // Qwen3-MoE: norm_topk_prob = !pre_softmax
  double moe_router_topk_scaling_factor = 1.0;  // DeepseekV3: routed_scaling_factor
  int moe_shared_expert_intermediate_size = 0;  // DeepseekV3: n_shared_experts * moe_ffn_hidden_size
  bool moe_router_enable_expert_bias = false;   // DeepseekV3: e_score_correction_bias
  int moe_router_num_groups = 0;  // DeepseekV3: n_group (0: no group-limited routing)
  int moe_router_group_topk = 0;  // DeepseekV3: topk_group
  bool qk_layernorm = false;  // Qwen3-MoE: q_norm/k_norm; DeepseekV3: the latent norms
  // Multi-latent attention (DeepseekV3): --q-lora-rank (0: none, q_proj), --kv-lora-rank,
  // --qk-head-dim (qk_nope_head_dim), --qk-pos-emb-head-dim (qk_rope_head_dim), --v-head-dim.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_head_dim = 0;
  int qk_pos_emb_head_dim = 0;
  int v_head_dim = 0;
  // Multi-latent attention's rotary embedding: --rope-type yarn (Megatron's MLA default) with
  // --rotary-scaling-factor, --mscale, --mscale-all-dim; original_max_position_embeddings, beta_fast
  // and beta_slow have no Megatron flag (MLATransformerConfig's 4096, 32, 1). A factor of 1 is
  // plain RoPE whichever the type (rope_scaling null).
  bool yarn = false;
  // Llama-style RoPE scaling (tools/convert_checkpoint/hf_llama_rope.hpp): --use-rope-scaling's
  // --rope-scaling-factor (0: off) and --rotary-seq-len-interpolation-factor.
  double llama3_rope_factor = 0.0;
  double linear_rope_factor = 1.0;
  double rotary_scaling_factor = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;

  bool qkv_bias() const { return add_bias_linear || add_qkv_bias; }
  /// Whether layer i has a MoE block (every layer for Mixtral).
  bool moe_layer(int i) const { return moe_layers.empty() ? num_experts > 0 : bool(moe_layers[std::size_t(i)]); }
};

/// From the common document's "args". Throws std::invalid_argument listing every missing field and
/// every setting GPT2LMHeadModel, LlamaForCausalLM and MixtralForCausalLM cannot express.
model_args args_from_megatron(const nlohmann::json& args);
/// The Megatron args a from-hf checkpoint records (enough for args_from_megatron and the trainer).
nlohmann::json megatron_args_json(const model_args& a);
/// config.json for the family (vocab_size = padded_vocab_size).
nlohmann::json hf_config_json(const model_args& a);
/// From config.json ("model_type" gpt2, llama, mixtral, deepseek_v3, qwen3 or qwen3_moe); std::invalid_argument naming what is unsupported.
model_args args_from_hf_config(const nlohmann::json& config);

}  // namespace mactor::convert
