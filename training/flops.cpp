// Megatron's num_floating_point_operations: the dense-transformer branch, with its
// multi-latent-attention term, its MoE MLP term (top-k routed experts and the shared expert on the
// --moe-layer-freq layers) and its multi-token prediction terms (each MTP depth counts as one
// more layer, plus its norms, eh_proj and one more logits GEMM), and the --is-hybrid-model branch
// (hybrid_flops: attention, MLP and Mamba layers counted from the pattern or the ratios).
#include "training/flops.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "config/moe_layout.hpp"

namespace mactor::training {
namespace {

// Megatron's MLA self-attention term: the latent projections (with their norms), the shared
// RoPE key, the output projection and half the causal score and value products, times 3 * 2.
double mla_attention_term(const config::megatron_args& a, double h, double heads, double layers, double seq) {
  const auto& m = a.mla;
  const double qk = static_cast<double>(m.qk_head_dim), pe = static_cast<double>(m.qk_pos_emb_head_dim);
  const double v = static_cast<double>(m.v_head_dim), kv_rank = static_cast<double>(m.kv_lora_rank);
  const double q_term = m.q_lora_rank ? static_cast<double>(*m.q_lora_rank) * (h + heads * (qk + pe) + 1) : h * heads * (qk + pe);
  return 3 * 2 * layers *
         (q_term + kv_rank * (h + heads * (qk + v) + 1) + h * pe + heads * v * h + seq * heads * (qk + pe) / 2 +
          seq * heads * v / 2);
}

// Megatron's hybrid_flops: each layer kind's forward FLOPs (its own formulas, which differ from
// the transformer branch's) plus the logits, times 3. Layer counts: the pattern's, or the ratios
// times num_layers rounded half to even (Python's round), Mamba the rest.
double hybrid_flops(const config::megatron_args& a, double vocab, double batch) {
  const auto& n = a.network_size;
  const auto& e = a.experimental;
  const double layers = static_cast<double>(*n.num_layers);
  double attention_layers = 0, mlp_layers = 0, mamba_layers = 0;
  if (e.hybrid_override_pattern) {
    for (char k : *e.hybrid_override_pattern) (k == '*' ? attention_layers : k == '-' ? mlp_layers : mamba_layers) += k == 'M' || k == '*' || k == '-';
  } else {
    attention_layers = std::nearbyint(layers * e.hybrid_attention_ratio);
    mlp_layers = std::nearbyint(layers * e.hybrid_mlp_ratio);
    mamba_layers = layers - attention_layers - mlp_layers;
  }
  const double h = static_cast<double>(*n.hidden_size), s = static_cast<double>(*a.data.seq_length), bs = batch * s;
  const double heads = static_cast<double>(*n.num_attention_heads);
  const double p = n.kv_channels ? static_cast<double>(*n.kv_channels) * heads / h : 1;
  const double g = n.group_query_attention ? static_cast<double>(n.num_query_groups) : heads;
  const double attention = 4 * bs * h * p * (h + h * (g / heads) + s / 2);
  const double mlp = 4 * (static_cast<double>(*n.ffn_hidden_size) / h) * (n.swiglu ? 1.5 : 1.0) * bs * h * h;
  const double d_in = 2 * h, state = static_cast<double>(e.mamba_state_dim);
  const double mamba_heads = e.mamba_num_heads ? static_cast<double>(*e.mamba_num_heads)
                                               : std::floor(d_in / static_cast<double>(e.mamba_head_dim));
  const double mamba = 2 * bs * h * (2 * d_in + 2 * static_cast<double>(e.mamba_num_groups) * state + mamba_heads) +
                       7 * bs * d_in * state + 2 * bs * d_in * h;
  return 3 * (attention_layers * attention + mlp_layers * mlp + mamba_layers * mamba + 2 * bs * h * vocab);
}

// Megatron's MLP term per token over num_layers (MTP depths included): dense layers' ffn, MoE
// layers' top-k routed experts and shared expert, from --moe-layer-freq (an MTP depth counts as
// the kind of the model's last layer).
double mlp_term(const config::megatron_args& a, double h, double layers, double mtp) {
  const auto& n = a.network_size;
  const auto& m = a.moe;
  const double gated = n.swiglu ? 1.5 : 1.0;
  const double ffn = static_cast<double>(*n.ffn_hidden_size);
  double dense = layers, moe = 0, routed = 0;
  if (m.num_experts) {
    const auto pattern = config::moe_layer_pattern(a);
    for (auto v : pattern) moe += static_cast<double>(v);
    const double last_is_moe = pattern.empty() ? 0.0 : static_cast<double>(pattern.back());
    moe += last_is_moe * mtp;
    dense = layers - moe;
    routed = static_cast<double>(m.moe_router_topk);
  }
  const double moe_ffn = m.moe_ffn_hidden_size ? static_cast<double>(*m.moe_ffn_hidden_size) : ffn;
  const double shared = static_cast<double>(m.moe_shared_expert_intermediate_size.value_or(0));
  const double expansion = 3 * 2 * 2;
  // Megatron writes each kind as a share of num_layers times num_layers; the product is written
  // out here (the simulator asks for zero layers).
  return expansion * h * (ffn * gated * dense + (moe_ffn * routed + shared) * gated * moe);
}

}  // namespace

double num_floating_point_operations(const config::megatron_args& a, std::int64_t padded_vocab_size,
                                     std::int64_t batch_size) {
  if (a.experimental.is_hybrid_model)
    return hybrid_flops(a, static_cast<double>(padded_vocab_size), static_cast<double>(batch_size));
  const auto& n = a.network_size;
  const double h = static_cast<double>(*n.hidden_size);
  const double heads = static_cast<double>(*n.num_attention_heads);
  const double mtp = static_cast<double>(n.mtp_num_layers.value_or(0));
  const double layers = static_cast<double>(*n.num_layers) + mtp;
  const double seq = static_cast<double>(*a.data.seq_length);
  const double kv_channels = static_cast<double>(n.kv_channels.value_or(static_cast<std::int64_t>(h / heads)));
  const double groups = n.group_query_attention ? static_cast<double>(n.num_query_groups) : heads;
  const double query_projection_ratio = kv_channels * heads / h;
  const double expansion = 3 * 2 * 2;  // forward + 2x backward, 2 FLOPs per multiply-add, 2 GEMMs
  const double attention = n.multi_latent_attention
                               ? mla_attention_term(a, h, heads, layers, seq)
                               : expansion * layers * h * h * ((1 + groups / heads + seq / h / 2) * query_projection_ratio);
  const double mlp = mlp_term(a, h, layers, mtp);
  const double mtp_norms_and_projection = 3 * 2 * mtp * (3 * h + 2 * h * h);
  const double logits = 3 * 2 * h * static_cast<double>(padded_vocab_size) * (mtp + 1);
  return static_cast<double>(batch_size) * seq * (mlp + attention + mtp_norms_and_projection + logits);
}

}  // namespace mactor::training
