// The model description shared by both conversion directions: read from the checkpoint's common
// "args" (Megatron's argparse dest names) or from a Hugging Face config.json, and written as either.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mactor::convert {

enum class hf_family { gpt2, llama, mixtral };  // GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM

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

  bool qkv_bias() const { return add_bias_linear || add_qkv_bias; }
};

/// From the common document's "args". Throws std::invalid_argument listing every missing field and
/// every setting GPT2LMHeadModel, LlamaForCausalLM and MixtralForCausalLM cannot express.
model_args args_from_megatron(const nlohmann::json& args);
/// The Megatron args a from-hf checkpoint records (enough for args_from_megatron and the trainer).
nlohmann::json megatron_args_json(const model_args& a);
/// config.json for the family (vocab_size = padded_vocab_size).
nlohmann::json hf_config_json(const model_args& a);
/// From config.json ("model_type" gpt2, llama or mixtral); std::invalid_argument naming what is unsupported.
model_args args_from_hf_config(const nlohmann::json& config);

}  // namespace mactor::convert
