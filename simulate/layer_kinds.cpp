// Each layer kind's FLOPs, parameters, expert exchange and routed activations (see layer_kinds.hpp).
#include "simulate/layer_kinds.hpp"

#include <algorithm>
#include <string>

#include "config/moe_layout.hpp"
#include "schedules/schedule_shape.hpp"
#include "schedules/shape_from_args.hpp"
#include "simulate/collectives.hpp"
#include "simulate/hybrid_layers.hpp"
#include "training/flops.hpp"

namespace mactor::simulate {
namespace {

double flops(const config::megatron_args& a, std::int64_t padded_vocab) {
  return training::num_floating_point_operations(a, padded_vocab, a.training.micro_batch_size.value_or(1));
}

// `a` with `layers` decoder layers, every one of them MoE (moe) or dense, and no MTP depth.
config::megatron_args isolated(const config::megatron_args& a, std::int64_t layers, bool moe) {
  config::megatron_args one = a;
  one.network_size.num_layers = layers;
  one.network_size.mtp_num_layers.reset();
  if (moe)
    one.moe.moe_layer_freq = std::int64_t{1};
  else
    one.moe.num_experts.reset();
  return one;
}

// `a` as a hybrid model of exactly the layers in `pattern`.
config::megatron_args with_pattern(const config::megatron_args& a, const std::string& pattern) {
  config::megatron_args one = a;
  one.experimental.is_hybrid_model = true;
  one.experimental.hybrid_override_pattern = pattern;
  one.network_size.num_layers = static_cast<std::int64_t>(pattern.size());
  return one;
}

// A hybrid model's kinds: Megatron's hybrid branch on one layer of each kind less none.
layer_kind_flops split_hybrid_flops(const config::megatron_args& a, std::int64_t padded_vocab) {
  layer_kind_flops f;
  const double none = flops(with_pattern(a, ""), padded_vocab);
  f.logits = none / 3;  // forward + 2x backward = 3x forward
  f.mamba_layer = (flops(with_pattern(a, "M"), padded_vocab) - none) / 3;
  f.attention_layer = (flops(with_pattern(a, "*"), padded_vocab) - none) / 3;
  f.mlp_layer = (flops(with_pattern(a, "-"), padded_vocab) - none) / 3;
  return f;
}

struct widths {
  double h, ffn, moe_ffn, shared, experts, topk, gated;
  int tp, ep, etp, cp;
};

widths widths_of(const config::megatron_args& a) {
  const auto& n = a.network_size;
  const auto& m = a.moe;
  widths w{};
  w.h = static_cast<double>(*n.hidden_size);
  w.ffn = static_cast<double>(n.ffn_hidden_size.value_or(4 * *n.hidden_size));
  w.moe_ffn = static_cast<double>(m.moe_ffn_hidden_size.value_or(static_cast<std::int64_t>(w.ffn)));
  w.shared = static_cast<double>(m.moe_shared_expert_intermediate_size.value_or(0));
  w.experts = static_cast<double>(m.num_experts.value_or(0));
  w.topk = static_cast<double>(m.moe_router_topk);
  w.gated = n.swiglu ? 2 : 1;  // fc1's output columns per hidden unit
  w.tp = static_cast<int>(a.distributed.tensor_model_parallel_size);
  w.cp = static_cast<int>(a.distributed.context_parallel_size);
  w.ep = static_cast<int>(m.expert_model_parallel_size);
  w.etp = static_cast<int>(m.expert_tensor_parallel_size.value_or(w.tp));
  return w;
}

// fc1 (h -> gated x ffn) and fc2 (ffn -> h), no biases counted beyond Megatron's own formula's.
double mlp_parameters(double h, double ffn, double gated) { return h * ffn * gated + ffn * h; }

// Rows each rank routes per microbatch: its sequence shard (tensor parallelism with MoE needs
// sequence parallelism, so every tensor-parallel rank routes its own part).
double routed_rows(const config::megatron_args& a, const widths& w) {
  const double tokens = static_cast<double>(a.training.micro_batch_size.value_or(1)) *
                        static_cast<double>(*a.data.seq_length) / w.cp / w.tp;
  return tokens * w.topk;
}

}  // namespace

double activation_element_bytes(const config::megatron_args& a) {
  return a.mixed_precision.bf16 || a.mixed_precision.fp16 ? 2 : 4;
}

layer_kind_flops split_layer_flops(const config::megatron_args& a, std::int64_t padded_vocab) {
  if (is_hybrid(a)) return split_hybrid_flops(a, padded_vocab);
  layer_kind_flops f;
  const double none = flops(isolated(a, 0, false), padded_vocab);
  f.logits = none / 3;  // forward + 2x backward = 3x forward
  f.dense_layer = (flops(isolated(a, 1, false), padded_vocab) - none) / 3;
  if (a.moe.num_experts) f.moe_layer = (flops(isolated(a, 1, true), padded_vocab) - none) / 3;
  if (const auto depths = a.network_size.mtp_num_layers.value_or(0); depths > 0) {
    config::megatron_args without = a;
    without.network_size.mtp_num_layers.reset();
    f.mtp_depth = (flops(a, padded_vocab) - flops(without, padded_vocab)) / 3 / static_cast<double>(depths);
  }
  return f;
}

std::vector<bool> moe_layers(const config::megatron_args& a) {
  const auto layers = static_cast<std::size_t>(a.network_size.num_layers.value_or(0));
  std::vector<bool> out(layers, false);
  if (!a.moe.num_experts) return out;
  const auto pattern = config::moe_layer_pattern(a);
  for (std::size_t i = 0; i < layers && i < pattern.size(); ++i) out[i] = pattern[i] != 0;
  return out;
}

layer_kind_counts layer_kinds_in(const config::megatron_args& a, int begin, int end) {
  layer_kind_counts n;
  if (is_hybrid(a)) {
    const auto kinds = hybrid_layers(a);
    for (int i = std::max(begin, 0); i < end && i < static_cast<int>(kinds.size()); ++i) {
      switch (kinds[i]) {
        case config::hybrid_layer::mamba: ++n.mamba; break;
        case config::hybrid_layer::attention: ++n.attention; break;
        case config::hybrid_layer::mlp: ++n.mlp; break;
      }
    }
    return n;
  }
  const auto kinds = moe_layers(a);
  for (int i = std::max(begin, 0); i < end && i < static_cast<int>(kinds.size()); ++i) ++(kinds[i] ? n.moe : n.dense);
  return n;
}

bool mtp_depth_is_moe(const config::megatron_args& a) {
  const auto kinds = moe_layers(a);
  return !kinds.empty() && kinds.back();
}

double core_attention_flops(const config::megatron_args& a) {
  const auto& n = a.network_size;
  const double b = static_cast<double>(a.training.micro_batch_size.value_or(1));
  const double s = static_cast<double>(*a.data.seq_length);
  const double heads = static_cast<double>(*n.num_attention_heads);
  if (n.multi_latent_attention) {
    const auto& m = a.mla;
    const double qk = static_cast<double>(m.qk_head_dim + m.qk_pos_emb_head_dim), v = static_cast<double>(m.v_head_dim);
    return b * s * s * heads * (qk + v);  // 2 FLOPs per multiply-add over half the causal square
  }
  const double kv = static_cast<double>(n.kv_channels.value_or(*n.hidden_size / *n.num_attention_heads));
  return 2 * b * s * s * kv * heads;
}

double attention_parameters(const config::megatron_args& a) {
  const auto& n = a.network_size;
  const widths w = widths_of(a);
  const double heads = static_cast<double>(*n.num_attention_heads);
  if (n.multi_latent_attention) {
    const auto& m = a.mla;
    const double qk = static_cast<double>(m.qk_head_dim), pe = static_cast<double>(m.qk_pos_emb_head_dim);
    const double v = static_cast<double>(m.v_head_dim), kv_rank = static_cast<double>(m.kv_lora_rank);
    // The down projections (and their norms) are duplicated on every tensor-parallel rank; the
    // up projections and the output projection are split.
    double replicated = w.h * (kv_rank + pe) + kv_rank, split = kv_rank * heads * (qk + v) + heads * v * w.h;
    if (m.q_lora_rank) {
      const double q_rank = static_cast<double>(*m.q_lora_rank);
      replicated += w.h * q_rank + q_rank;
      split += q_rank * heads * (qk + pe);
    } else {
      split += w.h * heads * (qk + pe);
    }
    return replicated + split / w.tp;
  }
  const double groups = n.group_query_attention ? static_cast<double>(n.num_query_groups) : heads;
  const double kv = static_cast<double>(n.kv_channels.value_or(*n.hidden_size / *n.num_attention_heads));
  return 2 * w.h * w.h * (1 + groups / heads) * (kv * heads / w.h) / w.tp;
}

double dense_layer_parameters(const config::megatron_args& a) {
  const widths w = widths_of(a);
  const double gated = w.gated == 2 ? 1.5 : 1.0;
  return attention_parameters(a) + (2 * w.h * (w.ffn * gated + 2)) / w.tp;
}

double local_expert_parameters(const config::megatron_args& a) {
  const widths w = widths_of(a);
  if (w.experts == 0) return 0;
  return w.experts / w.ep * mlp_parameters(w.h, w.moe_ffn, w.gated) / w.etp;
}

double moe_layer_parameters(const config::megatron_args& a) {
  const widths w = widths_of(a);
  const double router = w.experts * w.h;  // replicated
  const double shared = mlp_parameters(w.h, w.shared, w.gated) / w.tp;
  return attention_parameters(a) + 4 * w.h / w.tp + router + shared + local_expert_parameters(a);
}

int expert_data_parallel_size(const config::megatron_args& a) {
  const widths w = widths_of(a);
  const auto world = static_cast<int>(a.derived.data_parallel_size) * w.tp * w.cp;  // one pipeline stage's ranks
  return std::max(1, world / (w.ep * w.etp));
}

double moe_exchange_seconds(const config::megatron_args& a, const system_spec& system) {
  const widths w = widths_of(a);
  const double bytes = routed_rows(a, w) * w.h * activation_element_bytes(a);
  double s = 0;
  // Megatron's expert rank order puts the expert-tensor-parallel ranks innermost, then experts.
  if (w.ep > 1) s += 2 * all_to_all_seconds(system, {w.ep, w.etp}, bytes);  // dispatch, combine
  if (w.etp > 1) s += 2 * all_gather_seconds(system, {w.etp, 1}, bytes * w.etp);  // gather, reduce-scatter
  return s;
}

double moe_delayed_wgrad_hidden_seconds(const config::megatron_args& a, const system_spec& system, double rate) {
  const widths w = widths_of(a);
  if (!a.moe.delay_wgrad_compute || w.ep <= 1 || w.experts == 0 || schedules::splits_backward(schedules::shape_from_args(a)))
    return 0;
  const double rows = routed_rows(a, w);  // balanced routing: each rank's experts get as many rows as it routes
  const double dispatch_back = all_to_all_seconds(system, {w.ep, w.etp}, rows * w.h * activation_element_bytes(a));
  // Each weight gradient repeats its forward GEMM: fc1 (h -> gated x ffn) and fc2, split over etp.
  const double wgrad_flops = 2 * rows * mlp_parameters(w.h, w.moe_ffn, w.gated) / w.etp;
  return std::min(dispatch_back, wgrad_flops / rate);
}

double moe_mlp_activation_bytes(const config::megatron_args& a) {
  const widths w = widths_of(a);
  // Each routed row, gathered over the expert-tensor-parallel group: the expert's input, and
  // this rank's columns of fc1's output and of the activation's output, counted as Korthikanti's
  // dense MLP term counts them (ungated), so a one-expert MoE compares with a dense layer.
  return routed_rows(a, w) * (w.etp * w.h + 2 * w.moe_ffn) * activation_element_bytes(a);
}

}  // namespace mactor::simulate
