// A hybrid Mamba model's layer kinds: parameters and activations (see hybrid_layers.hpp).
#include "simulate/hybrid_layers.hpp"

#include <algorithm>
#include <cstdint>

#include "simulate/collectives.hpp"
#include "simulate/layer_kinds.hpp"

namespace mactor::simulate {
namespace {

// The mixer's widths as model/mamba_mixer.hpp derives them (expand 2, d_conv 4).
struct mamba_widths {
  double h, heads, groups, state, d_inner, groups_state, conv_dim, in_proj_out;
  int tp;
};

mamba_widths mamba_widths_of(const config::megatron_args& a) {
  const auto& e = a.experimental;
  mamba_widths w{};
  w.h = static_cast<double>(*a.network_size.hidden_size);
  w.heads = e.mamba_num_heads ? static_cast<double>(*e.mamba_num_heads)
                              : static_cast<double>(2 * *a.network_size.hidden_size / e.mamba_head_dim);
  w.d_inner = w.heads * static_cast<double>(e.mamba_head_dim);
  w.groups = static_cast<double>(e.mamba_num_groups);
  w.state = static_cast<double>(e.mamba_state_dim);
  w.groups_state = w.groups * w.state;
  w.conv_dim = w.d_inner + 2 * w.groups_state;
  w.in_proj_out = w.d_inner + w.conv_dim + w.heads;
  w.tp = static_cast<int>(a.distributed.tensor_model_parallel_size);
  return w;
}

double norm_parameters(const config::megatron_args& a) {
  const double h = static_cast<double>(*a.network_size.hidden_size);
  return a.network_size.normalization == "RMSNorm" ? h : 2 * h;  // LayerNorm: weight and bias
}

// One rank's share of a microbatch: its positions (the sequence / cp) x batch x hidden.
struct token_dims {
  double sbh, tp, ffn_over_h;
  bool sp;
};

token_dims token_dims_of(const config::megatron_args& a) {
  const auto& n = a.network_size;
  token_dims t{};
  t.sbh = static_cast<double>(a.training.micro_batch_size.value_or(1)) * static_cast<double>(*a.data.seq_length) /
          static_cast<double>(a.distributed.context_parallel_size) * static_cast<double>(*n.hidden_size);
  t.tp = static_cast<double>(a.distributed.tensor_model_parallel_size);
  t.ffn_over_h = static_cast<double>(n.ffn_hidden_size.value_or(4 * *n.hidden_size)) / static_cast<double>(*n.hidden_size);
  t.sp = a.training.sequence_parallel;
  return t;
}

}  // namespace

bool is_hybrid(const config::megatron_args& a) { return a.experimental.is_hybrid_model; }

std::vector<config::hybrid_layer> hybrid_layers(const config::megatron_args& a) {
  config::hybrid_allocation_settings s;
  s.num_layers = static_cast<int>(a.network_size.num_layers.value_or(0));
  s.attention_ratio = a.experimental.hybrid_attention_ratio;
  s.mlp_ratio = a.experimental.hybrid_mlp_ratio;
  s.pattern = a.experimental.hybrid_override_pattern;
  return config::allocate_hybrid_layers(s);
}

double mamba_layer_parameters(const config::megatron_args& a) {
  const mamba_widths w = mamba_widths_of(a);
  const double d_conv = 4;
  const double split = w.h * w.in_proj_out + w.conv_dim * (d_conv + 1) + 3 * w.heads + w.d_inner + w.d_inner * w.h;
  return norm_parameters(a) + split / w.tp;
}

double attention_only_layer_parameters(const config::megatron_args& a) {
  return attention_parameters(a) + norm_parameters(a);
}

double mlp_only_layer_parameters(const config::megatron_args& a) {
  const token_dims t = token_dims_of(a);
  const double h = static_cast<double>(*a.network_size.hidden_size);
  const double gated = a.network_size.swiglu ? 2 : 1;
  return h * t.ffn_over_h * h * (gated + 1) / t.tp + norm_parameters(a);
}

double mamba_activation_bytes(const config::megatron_args& a) {
  const mamba_widths w = mamba_widths_of(a);
  const token_dims t = token_dims_of(a);
  const double tokens = t.sbh / w.h;
  const double element = activation_element_bytes(a);
  const double inputs = 2 * w.h / (t.sp ? w.tp : 1);  // the layer's input and its norm's output
  return tokens * element * (inputs + (w.in_proj_out + w.conv_dim + 2 * w.d_inner) / w.tp);
}

std::vector<double> mamba_context_parallel_exchange_bytes(const config::megatron_args& a) {
  const int cp = static_cast<int>(a.distributed.context_parallel_size);
  if (cp <= 1) return {};
  const mamba_widths w = mamba_widths_of(a);
  const token_dims t = token_dims_of(a);
  const double rows = t.sbh / w.h * activation_element_bytes(a);  // this rank's positions, in bytes per column
  const double groups = w.groups / w.tp;
  const double bc = groups * std::max(1.0, cp / groups) * w.state;  // each group once per rank holding its heads
  return {rows * w.d_inner / w.tp, rows * bc, rows * bc, rows * w.heads / w.tp, rows * w.d_inner / w.tp};
}

std::string mamba_context_parallel_mismatch(const config::megatron_args& a) {
  const auto cp = static_cast<std::int64_t>(a.distributed.context_parallel_size);
  if (cp <= 1) return {};
  const mamba_widths w = mamba_widths_of(a);
  const auto heads = static_cast<std::int64_t>(w.heads) / w.tp, groups = static_cast<std::int64_t>(w.groups) / w.tp;
  const auto numbers = "the Mamba heads (" + std::to_string(heads) + ") and groups (" + std::to_string(groups) +
                       ") per tensor-parallel rank with --context-parallel-size " + std::to_string(cp);
  if (heads % cp != 0) return "nheads must be evenly divisible by tp_size * cp_size (Megatron's MambaContextParallel): " + numbers;
  if (groups < cp ? groups == 0 || cp % groups != 0 : groups % cp != 0)
    return std::string(groups < cp ? "cp_size must be evenly divisible by ngroups/tp_size"
                                   : "ngroups must be evenly divisible by tp_size * cp_size") +
           " (Megatron's MambaContextParallel): " + numbers;
  return {};
}

double mamba_context_parallel_exchange_seconds(const config::megatron_args& a, const system_spec& system) {
  const process_group_shape cp{static_cast<int>(a.distributed.context_parallel_size),
                               static_cast<int>(a.distributed.tensor_model_parallel_size)};
  double s = 0;
  for (const double bytes : mamba_context_parallel_exchange_bytes(a)) s += all_to_all_seconds(system, cp, bytes);
  return s;
}

double attention_only_activation_bytes(const config::megatron_args& a) {
  const token_dims t = token_dims_of(a);
  // Of the 11 sbh: input 2 and dropout mask 1 whole without sequence parallelism, Q, K, V and
  // the projection's input (8) / tp; the norm's 2 whole.
  double bytes = t.sp ? t.sbh * 13 / t.tp : t.sbh * (5 + 8 / t.tp);
  const bool scores_kept = a.training.recompute_granularity != "selective" &&
                           (a.network_size.attention_backend == "unfused" || a.network_size.attention_backend == "local");
  if (scores_kept) {
    const double heads = static_cast<double>(*a.network_size.num_attention_heads);
    const double s = static_cast<double>(*a.data.seq_length), h = static_cast<double>(*a.network_size.hidden_size);
    bytes += 5 * heads * s * t.sbh / h / t.tp;
  }
  return bytes;
}

double mlp_only_activation_bytes(const config::megatron_args& a) {
  const token_dims t = token_dims_of(a);
  // fc1's input 2, dropout mask 1 and the norm's 2 whole without sequence parallelism; the
  // activation's and fc2's inputs (4 ffn/h) / tp.
  return t.sp ? t.sbh * (5 + 4 * t.ffn_over_h) / t.tp : t.sbh * (5 + 4 * t.ffn_over_h / t.tp);
}

}  // namespace mactor::simulate
