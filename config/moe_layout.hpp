// Facts about a MoE model's layout and losses that several layers read from the parsed flags.
#pragma once
#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::config {

/// Whether the experts reduce over process groups of their own: a MoE model with expert
/// parallelism, or with an --expert-tensor-parallel-size other than the tensor-parallel size
/// (Megatron's expert-data-parallel group then differs from the data-parallel one).
inline bool experts_have_own_groups(const megatron_args& a) {
  const auto tp = a.distributed.tensor_model_parallel_size;
  return a.moe.num_experts.value_or(0) > 0 &&
         (a.moe.expert_model_parallel_size > 1 || a.moe.expert_tensor_parallel_size.value_or(tp) != tp);
}

/// --moe-layer-freq as one 0/1 per decoder layer: an int N makes layers 0, N, 2N, ... (0-based)
/// MoE layers; the list form is taken as given.
inline std::vector<std::int64_t> moe_layer_pattern(const megatron_args& a) {
  if (const auto* list = std::get_if<std::vector<std::int64_t>>(&a.moe.moe_layer_freq)) return *list;
  const std::int64_t every = std::get<std::int64_t>(a.moe.moe_layer_freq);
  std::vector<std::int64_t> pattern;
  for (std::int64_t i = 0; i < a.network_size.num_layers.value_or(0); ++i)
    pattern.push_back(every > 0 && i % every == 0 ? 1 : 0);
  return pattern;
}

/// Whether --moe-router-load-balancing-type (one type or the list form) names `type`.
inline bool names_load_balancing_type(const megatron_args& a, const std::string& type) {
  const auto& t = a.moe.moe_router_load_balancing_type;
  if (const auto* one = std::get_if<std::string>(&t)) return *one == type;
  const auto& list = std::get<std::vector<std::string>>(t);
  return std::find(list.begin(), list.end(), type) != list.end();
}

}  // namespace mactor::config
