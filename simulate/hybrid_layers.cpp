// A hybrid Mamba model's layer kinds: FLOPs, parameters and activations (see hybrid_layers.hpp).
#include "simulate/hybrid_layers.hpp"

#include <algorithm>
#include <string>

#include "simulate/layer_kinds.hpp"
#include "training/flops.hpp"

namespace mactor::simulate {
namespace {

double flops(const config::megatron_args& a, std::int64_t padded_vocab) {
  return training::num_floating_point_operations(a, padded_vocab, a.training.micro_batch_size.value_or(1));
}

// `a` as a hybrid model of exactly the layers in `pattern`.
config::megatron_args with_pattern(const config::megatron_args& a, const std::string& pattern) {
  config::megatron_args one = a;
  one.experimental.is_hybrid_model = true;
  one.experimental.hybrid_override_pattern = pattern;
  one.network_size.num_layers = static_cast<std::int64_t>(pattern.size());
  return one;
}

// The mixer's widths as model/mamba_mixer.hpp derives them (expand 2, d_conv 4).
struct mamba_widths {
  double h, heads, d_inner, groups_state, conv_dim, in_proj_out;
  int tp;
};

mamba_widths mamba_widths_of(const config::megatron_args& a) {
  const auto& e = a.experimental;
  mamba_widths w{};
  w.h = static_cast<double>(*a.network_size.hidden_size);
  w.heads = e.mamba_num_heads ? static_cast<double>(*e.mamba_num_heads)
                              : static_cast<double>(2 * *a.network_size.hidden_size / e.mamba_head_dim);
  w.d_inner = w.heads * static_cast<double>(e.mamba_head_dim);
  w.groups_state = static_cast<double>(e.mamba_num_groups * e.mamba_state_dim);
  w.conv_dim = w.d_inner + 2 * w.groups_state;
  w.in_proj_out = w.d_inner + w.conv_dim + w.heads;
  w.tp = static_cast<int>(a.distributed.tensor_model_parallel_size);
  return w;
}

double norm_parameters(const config::megatron_args& a) {
  const double h = static_cast<double>(*a.network_size.hidden_size);
  return a.network_size.normalization == "RMSNorm" ? h : 2 * h;  // LayerNorm: weight and bias
}

struct token_dims {
  double sbh, tp, ffn_over_h;
  bool sp;
};

token_dims token_dims_of(const config::megatron_args& a) {
  const auto& n = a.network_size;
  token_dims t{};
  t.sbh = static_cast<double>(a.training.micro_batch_size.value_or(1)) * static_cast<double>(*a.data.seq_length) *
          static_cast<double>(*n.hidden_size);
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

hybrid_layer_counts hybrid_layers_in(const config::megatron_args& a, int begin, int end) {
  const auto kinds = hybrid_layers(a);
  hybrid_layer_counts n;
  for (int i = std::max(begin, 0); i < end && i < static_cast<int>(kinds.size()); ++i) {
    switch (kinds[i]) {
      case config::hybrid_layer::mamba: ++n.mamba; break;
      case config::hybrid_layer::attention: ++n.attention; break;
      case config::hybrid_layer::mlp: ++n.mlp; break;
    }
  }
  return n;
}

hybrid_kind_flops split_hybrid_flops(const config::megatron_args& a, std::int64_t padded_vocab) {
  hybrid_kind_flops f;
  const double none = flops(with_pattern(a, ""), padded_vocab);
  f.logits = none / 3;  // forward + 2x backward = 3x forward
  f.mamba = (flops(with_pattern(a, "M"), padded_vocab) - none) / 3;
  f.attention = (flops(with_pattern(a, "*"), padded_vocab) - none) / 3;
  f.mlp = (flops(with_pattern(a, "-"), padded_vocab) - none) / 3;
  return f;
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
  const double element = a.mixed_precision.bf16 || a.mixed_precision.fp16 ? 2 : 4;
  const double inputs = 2 * w.h / (t.sp ? w.tp : 1);  // the layer's input and its norm's output
  return tokens * element * (inputs + (w.in_proj_out + w.conv_dim + 2 * w.d_inner) / w.tp);
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
