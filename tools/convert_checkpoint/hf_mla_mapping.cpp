// Megatron's MLASelfAttention <-> DeepseekV3Attention. The layouts agree row for row: the query
// rows per head [q_nope (qk_head_dim); q_pe (qk_pos_emb_head_dim)], linear_kv_down_proj's rows
// [latent (kv_lora_rank); k_pe], linear_kv_up_proj's per head [k_nope; v]. Megatron's MLA RoPE
// reads each positional part as interleaved pairs, which is DeepseekV3's rope_interleave, so no
// row is permuted.
#include "tools/convert_checkpoint/hf_layer_mapping.hpp"

#include <tuple>

namespace mactor::convert {
namespace {

struct mla_shapes {
  std::int64_t h, q_out, kv_down, kv_up, v_out;
};

mla_shapes shapes(const model_args& a) {
  const std::int64_t heads = a.num_attention_heads;
  return {a.hidden_size, heads * (a.qk_head_dim + a.qk_pos_emb_head_dim),
          std::int64_t(a.kv_lora_rank) + a.qk_pos_emb_head_dim, heads * (a.qk_head_dim + a.v_head_dim),
          heads * a.v_head_dim};
}

// (Megatron suffix, Hugging Face suffix, shape) of every MLA tensor under these args.
std::vector<std::tuple<std::string, std::string, shape_t>> mla_table(const model_args& a) {
  const auto s = shapes(a);
  const std::string m = "self_attention.", o = "self_attn.";
  std::vector<std::tuple<std::string, std::string, shape_t>> t;
  if (a.q_lora_rank > 0) {
    t.push_back({m + "linear_q_down_proj.weight", o + "q_a_proj.weight", {a.q_lora_rank, s.h}});
    t.push_back({m + "q_layernorm.weight", o + "q_a_layernorm.weight", {a.q_lora_rank}});
    t.push_back({m + "linear_q_up_proj.weight", o + "q_b_proj.weight", {s.q_out, a.q_lora_rank}});
  } else {
    t.push_back({m + "linear_q_proj.weight", o + "q_proj.weight", {s.q_out, s.h}});
  }
  t.push_back({m + "linear_kv_down_proj.weight", o + "kv_a_proj_with_mqa.weight", {s.kv_down, s.h}});
  t.push_back({m + "kv_layernorm.weight", o + "kv_a_layernorm.weight", {a.kv_lora_rank}});
  t.push_back({m + "linear_kv_up_proj.weight", o + "kv_b_proj.weight", {s.kv_up, a.kv_lora_rank}});
  t.push_back({m + "linear_proj.weight", o + "o_proj.weight", {s.h, s.v_out}});
  return t;
}

}  // namespace

void mla_parameters(const model_args& a, const std::string& l, parameter_list& p) {
  for (const auto& [mine, theirs, shape] : mla_table(a)) p.push_back({l + mine, shape});
}

void mla_to_hf(const model_args& a, const std::string& l, const std::string& o, const megatron_getter& get,
               tensor_map& hf) {
  for (const auto& [mine, theirs, shape] : mla_table(a)) hf[o + theirs] = get(l + mine);
}

void mla_from_hf(const model_args& a, const std::string& l, const std::string& o, const hf_getter& get,
                 tensor_map& m) {
  for (const auto& [mine, theirs, shape] : mla_table(a)) m[l + mine] = get(o + theirs, shape);
}

}  // namespace mactor::convert
