// The name and layout tables of the GPT-2, Llama and Mixtral families (DeepseekV3's attention and
// the DeepseekV3 / Qwen3-MoE MLP blocks in hf_mla_mapping.cpp and hf_moe_mapping.cpp).
#include "tools/convert_checkpoint/hf_mapping.hpp"

#include "tools/convert_checkpoint/hf_layer_mapping.hpp"
#include "tools/convert_checkpoint/hf_tensors.hpp"

#include <algorithm>
#include <stdexcept>

namespace mactor::convert {
namespace {

// Megatron's fused QKV rows come per query group: [q heads of the group; k; v], head_dim rows
// each. Returns the separate q [heads*d, ...], k [groups*d, ...], v [groups*d, ...].
struct qkv_parts {
  dense_tensor q, k, v;
};

qkv_parts split_qkv(const model_args& a, const dense_tensor& fused) {
  const std::int64_t d = a.kv_channels, per = a.num_attention_heads / a.num_query_groups;
  std::vector<const dense_tensor*> q, k, v;
  std::vector<dense_tensor> blocks;
  blocks.reserve(std::size_t(3 * a.num_query_groups));
  for (std::int64_t g = 0; g < a.num_query_groups; ++g) {
    const std::int64_t base = g * (per + 2) * d;
    blocks.push_back(rows(fused, base, base + per * d));
    q.push_back(&blocks.back());
    blocks.push_back(rows(fused, base + per * d, base + (per + 1) * d));
    k.push_back(&blocks.back());
    blocks.push_back(rows(fused, base + (per + 1) * d, base + (per + 2) * d));
    v.push_back(&blocks.back());
  }
  return {concat_rows(q), concat_rows(k), concat_rows(v)};
}

dense_tensor merge_qkv(const model_args& a, const dense_tensor& q, const dense_tensor& k,
                       const dense_tensor& v) {
  const std::int64_t d = a.kv_channels, per = a.num_attention_heads / a.num_query_groups;
  std::vector<dense_tensor> blocks;
  blocks.reserve(std::size_t(3 * a.num_query_groups));
  std::vector<const dense_tensor*> order;
  for (std::int64_t g = 0; g < a.num_query_groups; ++g) {
    blocks.push_back(rows(q, g * per * d, (g + 1) * per * d));
    order.push_back(&blocks.back());
    blocks.push_back(rows(k, g * d, (g + 1) * d));
    order.push_back(&blocks.back());
    blocks.push_back(rows(v, g * d, (g + 1) * d));
    order.push_back(&blocks.back());
  }
  return concat_rows(order);
}

}  // namespace

std::vector<std::pair<std::string, shape_t>> megatron_parameters(const model_args& a) {
  const std::int64_t h = a.hidden_size, d = a.kv_channels, heads = a.num_attention_heads;
  const std::int64_t qkv = (heads + 2 * a.num_query_groups) * d;
  const std::int64_t fc1 = a.swiglu ? 2 * a.ffn_hidden_size : a.ffn_hidden_size;
  const bool ln = a.family == hf_family::gpt2;
  std::vector<std::pair<std::string, shape_t>> p;
  p.push_back({"embedding.word_embeddings.weight", {a.padded_vocab_size, h}});
  if (ln) p.push_back({"embedding.position_embeddings.weight", {a.max_position_embeddings, h}});
  auto add_norm = [&](const std::string& n) {
    p.push_back({n + ".weight", {h}});
    if (ln) p.push_back({n + ".bias", {h}});
  };
  for (int i = 0; i < a.num_layers; ++i) {
    const std::string l = layer(i);
    add_norm(l + "input_layernorm");
    add_norm(l + "pre_mlp_layernorm");
    if (a.family == hf_family::deepseek_v3) {
      mla_parameters(a, l, p);
      mlp_block_parameters(a, i, p);
      continue;
    }
    p.push_back({l + "self_attention.linear_qkv.weight", {qkv, h}});
    if (a.qkv_bias()) p.push_back({l + "self_attention.linear_qkv.bias", {qkv}});
    p.push_back({l + "self_attention.linear_proj.weight", {h, heads * d}});
    if (a.add_bias_linear) p.push_back({l + "self_attention.linear_proj.bias", {h}});
    if (a.qk_layernorm) {
      p.push_back({l + "self_attention.q_layernorm.weight", {d}});
      p.push_back({l + "self_attention.k_layernorm.weight", {d}});
    }
    if (a.family == hf_family::qwen3_moe) {
      mlp_block_parameters(a, i, p);
      continue;
    }
    if (a.family == hf_family::mixtral) {
      p.push_back({l + "mlp.router.weight", {a.num_experts, h}});
      for (int e = 0; e < a.num_experts; ++e) {
        p.push_back({expert_weight(a, l, e, 1), {2 * std::int64_t(a.moe_ffn_hidden_size), h}});
        p.push_back({expert_weight(a, l, e, 2), {h, a.moe_ffn_hidden_size}});
      }
      continue;
    }
    p.push_back({l + "mlp.linear_fc1.weight", {fc1, h}});
    if (a.add_bias_linear) p.push_back({l + "mlp.linear_fc1.bias", {fc1}});
    p.push_back({l + "mlp.linear_fc2.weight", {h, a.ffn_hidden_size}});
    if (a.add_bias_linear) p.push_back({l + "mlp.linear_fc2.bias", {h}});
  }
  add_norm("decoder.final_layernorm");
  if (a.untie_embeddings_and_output_weights)
    p.push_back({"output_layer.weight", {a.padded_vocab_size, h}});
  return p;
}

tensor_map megatron_to_hf(const model_args& a, const tensor_map& m) {
  const char* where = "the checkpoint";
  auto get = [&](const std::string& name) -> const dense_tensor& {
    for (const auto& [n, shape] : megatron_parameters(a))
      if (n == name) return need(m, name, shape, where);
    throw std::logic_error("megatron_to_hf asked for unregistered " + name);
  };
  tensor_map hf;
  const std::int64_t h = a.hidden_size;
  if (a.family == hf_family::gpt2) {
    hf["transformer.wte.weight"] = get("embedding.word_embeddings.weight");
    hf["transformer.wpe.weight"] = get("embedding.position_embeddings.weight");
    for (int i = 0; i < a.num_layers; ++i) {
      const std::string l = layer(i), o = "transformer.h." + std::to_string(i) + ".";
      for (auto [from, to] : {std::pair{"input_layernorm", "ln_1"}, {"pre_mlp_layernorm", "ln_2"}}) {
        hf[o + to + ".weight"] = get(l + from + ".weight");
        hf[o + to + ".bias"] = get(l + from + ".bias");
      }
      const auto w = split_qkv(a, get(l + "self_attention.linear_qkv.weight"));
      hf[o + "attn.c_attn.weight"] = transpose(concat_rows({&w.q, &w.k, &w.v}));
      const std::int64_t qkv = 3 * h;
      if (a.qkv_bias()) {
        const auto b = split_qkv(a, get(l + "self_attention.linear_qkv.bias"));
        hf[o + "attn.c_attn.bias"] = concat_rows({&b.q, &b.k, &b.v});
      } else {
        hf[o + "attn.c_attn.bias"] = zeros(qkv);
      }
      hf[o + "attn.c_proj.weight"] = transpose(get(l + "self_attention.linear_proj.weight"));
      hf[o + "mlp.c_fc.weight"] = transpose(get(l + "mlp.linear_fc1.weight"));
      hf[o + "mlp.c_proj.weight"] = transpose(get(l + "mlp.linear_fc2.weight"));
      const bool b = a.add_bias_linear;
      hf[o + "attn.c_proj.bias"] = b ? get(l + "self_attention.linear_proj.bias") : zeros(h);
      hf[o + "mlp.c_fc.bias"] = b ? get(l + "mlp.linear_fc1.bias") : zeros(a.ffn_hidden_size);
      hf[o + "mlp.c_proj.bias"] = b ? get(l + "mlp.linear_fc2.bias") : zeros(h);
    }
    hf["transformer.ln_f.weight"] = get("decoder.final_layernorm.weight");
    hf["transformer.ln_f.bias"] = get("decoder.final_layernorm.bias");
  } else {
    hf["model.embed_tokens.weight"] = get("embedding.word_embeddings.weight");
    for (int i = 0; i < a.num_layers; ++i) {
      const std::string l = layer(i), o = "model.layers." + std::to_string(i) + ".";
      hf[o + "input_layernorm.weight"] = get(l + "input_layernorm.weight");
      hf[o + "post_attention_layernorm.weight"] = get(l + "pre_mlp_layernorm.weight");
      if (a.family == hf_family::deepseek_v3) {
        mla_to_hf(a, l, o, get, hf);
        mlp_block_to_hf(a, i, get, hf);
        continue;
      }
      if (a.qk_layernorm) {
        hf[o + "self_attn.q_norm.weight"] = get(l + "self_attention.q_layernorm.weight");
        hf[o + "self_attn.k_norm.weight"] = get(l + "self_attention.k_layernorm.weight");
      }
      auto w = split_qkv(a, get(l + "self_attention.linear_qkv.weight"));
      hf[o + "self_attn.q_proj.weight"] = std::move(w.q);
      hf[o + "self_attn.k_proj.weight"] = std::move(w.k);
      hf[o + "self_attn.v_proj.weight"] = std::move(w.v);
      hf[o + "self_attn.o_proj.weight"] = get(l + "self_attention.linear_proj.weight");
      if (a.qkv_bias()) {
        auto b = split_qkv(a, get(l + "self_attention.linear_qkv.bias"));
        hf[o + "self_attn.q_proj.bias"] = std::move(b.q);
        hf[o + "self_attn.k_proj.bias"] = std::move(b.k);
        hf[o + "self_attn.v_proj.bias"] = std::move(b.v);
        hf[o + "self_attn.o_proj.bias"] =
            a.add_bias_linear ? get(l + "self_attention.linear_proj.bias") : zeros(h);
      }
      if (a.family == hf_family::qwen3_moe) {
        mlp_block_to_hf(a, i, get, hf);
        continue;
      }
      if (a.family == hf_family::mixtral) {
        const std::string moe = o + "block_sparse_moe.";
        const std::int64_t f = a.moe_ffn_hidden_size;
        hf[moe + "gate.weight"] = get(l + "mlp.router.weight");
        for (int e = 0; e < a.num_experts; ++e) {
          const std::string x = moe + "experts." + std::to_string(e) + ".";
          const auto& fc1 = get(expert_weight(a, l, e, 1));
          hf[x + "w1.weight"] = rows(fc1, 0, f);
          hf[x + "w3.weight"] = rows(fc1, f, 2 * f);
          hf[x + "w2.weight"] = get(expert_weight(a, l, e, 2));
        }
        continue;
      }
      const auto& fc1 = get(l + "mlp.linear_fc1.weight");
      const std::int64_t f = a.ffn_hidden_size;
      hf[o + "mlp.gate_proj.weight"] = rows(fc1, 0, f);
      hf[o + "mlp.up_proj.weight"] = rows(fc1, f, 2 * f);
      hf[o + "mlp.down_proj.weight"] = get(l + "mlp.linear_fc2.weight");
      if (a.add_bias_linear) {
        const auto& b1 = get(l + "mlp.linear_fc1.bias");
        hf[o + "mlp.gate_proj.bias"] = rows(b1, 0, f);
        hf[o + "mlp.up_proj.bias"] = rows(b1, f, 2 * f);
        hf[o + "mlp.down_proj.bias"] = get(l + "mlp.linear_fc2.bias");
      }
    }
    hf["model.norm.weight"] = get("decoder.final_layernorm.weight");
  }
  if (a.untie_embeddings_and_output_weights) hf["lm_head.weight"] = get("output_layer.weight");
  return hf;
}

tensor_map hf_to_megatron(const model_args& a, const tensor_map& hf) {
  const char* where = "model.safetensors";
  const std::int64_t h = a.hidden_size, d = a.kv_channels, f = a.ffn_hidden_size;
  const std::int64_t heads = a.num_attention_heads, groups = a.num_query_groups;
  auto get = [&](const std::string& name, const shape_t& shape) -> const dense_tensor& {
    return need(hf, name, shape, where);
  };
  tensor_map m;
  if (a.family == hf_family::gpt2) {
    m["embedding.word_embeddings.weight"] = get("transformer.wte.weight", {a.padded_vocab_size, h});
    m["embedding.position_embeddings.weight"] =
        get("transformer.wpe.weight", {a.max_position_embeddings, h});
    for (int i = 0; i < a.num_layers; ++i) {
      const std::string l = layer(i), o = "transformer.h." + std::to_string(i) + ".";
      for (auto [to, from] : {std::pair{"input_layernorm", "ln_1"}, {"pre_mlp_layernorm", "ln_2"}}) {
        m[l + to + ".weight"] = get(o + from + ".weight", {h});
        m[l + to + ".bias"] = get(o + from + ".bias", {h});
      }
      const auto qkv_rows = transpose(get(o + "attn.c_attn.weight", {h, 3 * h}));
      const auto q = rows(qkv_rows, 0, h), k = rows(qkv_rows, h, 2 * h), v = rows(qkv_rows, 2 * h, 3 * h);
      m[l + "self_attention.linear_qkv.weight"] = merge_qkv(a, q, k, v);
      const auto& b = get(o + "attn.c_attn.bias", {3 * h});
      m[l + "self_attention.linear_qkv.bias"] =
          merge_qkv(a, rows(b, 0, h), rows(b, h, 2 * h), rows(b, 2 * h, 3 * h));
      m[l + "self_attention.linear_proj.weight"] = transpose(get(o + "attn.c_proj.weight", {h, h}));
      m[l + "self_attention.linear_proj.bias"] = get(o + "attn.c_proj.bias", {h});
      m[l + "mlp.linear_fc1.weight"] = transpose(get(o + "mlp.c_fc.weight", {h, f}));
      m[l + "mlp.linear_fc1.bias"] = get(o + "mlp.c_fc.bias", {f});
      m[l + "mlp.linear_fc2.weight"] = transpose(get(o + "mlp.c_proj.weight", {f, h}));
      m[l + "mlp.linear_fc2.bias"] = get(o + "mlp.c_proj.bias", {h});
    }
    m["decoder.final_layernorm.weight"] = get("transformer.ln_f.weight", {h});
    m["decoder.final_layernorm.bias"] = get("transformer.ln_f.bias", {h});
  } else {
    m["embedding.word_embeddings.weight"] = get("model.embed_tokens.weight", {a.padded_vocab_size, h});
    for (int i = 0; i < a.num_layers; ++i) {
      const std::string l = layer(i), o = "model.layers." + std::to_string(i) + ".";
      m[l + "input_layernorm.weight"] = get(o + "input_layernorm.weight", {h});
      m[l + "pre_mlp_layernorm.weight"] = get(o + "post_attention_layernorm.weight", {h});
      if (a.family == hf_family::deepseek_v3) {
        mla_from_hf(a, l, o, get, m);
        mlp_block_from_hf(a, i, get, m);
        continue;
      }
      if (a.qk_layernorm) {
        m[l + "self_attention.q_layernorm.weight"] = get(o + "self_attn.q_norm.weight", {d});
        m[l + "self_attention.k_layernorm.weight"] = get(o + "self_attn.k_norm.weight", {d});
      }
      m[l + "self_attention.linear_qkv.weight"] =
          merge_qkv(a, get(o + "self_attn.q_proj.weight", {heads * d, h}),
                    get(o + "self_attn.k_proj.weight", {groups * d, h}),
                    get(o + "self_attn.v_proj.weight", {groups * d, h}));
      m[l + "self_attention.linear_proj.weight"] = get(o + "self_attn.o_proj.weight", {h, heads * d});
      if (a.qkv_bias()) {
        m[l + "self_attention.linear_qkv.bias"] =
            merge_qkv(a, get(o + "self_attn.q_proj.bias", {heads * d}),
                      get(o + "self_attn.k_proj.bias", {groups * d}),
                      get(o + "self_attn.v_proj.bias", {groups * d}));
        const auto& ob = get(o + "self_attn.o_proj.bias", {h});
        if (a.add_bias_linear) m[l + "self_attention.linear_proj.bias"] = ob;
        else require_zero(ob, o + "self_attn.o_proj.bias");
      }
      if (a.family == hf_family::qwen3_moe) {
        mlp_block_from_hf(a, i, get, m);
        continue;
      }
      if (a.family == hf_family::mixtral) {
        const std::string moe = o + "block_sparse_moe.";
        const std::int64_t mf = a.moe_ffn_hidden_size;
        m[l + "mlp.router.weight"] = get(moe + "gate.weight", {a.num_experts, h});
        for (int e = 0; e < a.num_experts; ++e) {
          const std::string x = moe + "experts." + std::to_string(e) + ".";
          m[expert_weight(a, l, e, 1)] =
              concat_rows({&get(x + "w1.weight", {mf, h}), &get(x + "w3.weight", {mf, h})});
          m[expert_weight(a, l, e, 2)] = get(x + "w2.weight", {h, mf});
        }
        continue;
      }
      const auto& gate = get(o + "mlp.gate_proj.weight", {f, h});
      const auto& up = get(o + "mlp.up_proj.weight", {f, h});
      m[l + "mlp.linear_fc1.weight"] = concat_rows({&gate, &up});
      m[l + "mlp.linear_fc2.weight"] = get(o + "mlp.down_proj.weight", {h, f});
      if (a.add_bias_linear) {
        m[l + "mlp.linear_fc1.bias"] =
            concat_rows({&get(o + "mlp.gate_proj.bias", {f}), &get(o + "mlp.up_proj.bias", {f})});
        m[l + "mlp.linear_fc2.bias"] = get(o + "mlp.down_proj.bias", {h});
      }
    }
    m["decoder.final_layernorm.weight"] = get("model.norm.weight", {h});
  }
  if (a.untie_embeddings_and_output_weights)
    m["output_layer.weight"] = get("lm_head.weight", {a.padded_vocab_size, h});
  return m;
}

}  // namespace mactor::convert
