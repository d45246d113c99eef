// One layer's time and how a chunk adds it up (see the header).
#include "simulate/layer_time.hpp"

#include "simulate/collectives.hpp"
#include "simulate/context_parallel_cost.hpp"
#include "simulate/elementwise_traffic.hpp"
#include "simulate/hybrid_layers.hpp"
#include "simulate/layer_kinds.hpp"
#include "simulate/rank_skew.hpp"

namespace mactor::simulate {

dims dims_of(const config::megatron_args& a) {
  const auto& n = a.network_size;
  dims d{};
  d.b = static_cast<double>(a.training.micro_batch_size.value_or(1));
  d.s = static_cast<double>(*a.data.seq_length);
  d.h = static_cast<double>(*n.hidden_size);
  d.ffn = static_cast<double>(n.ffn_hidden_size.value_or(4 * *n.hidden_size));
  d.heads = static_cast<double>(*n.num_attention_heads);
  d.groups = n.group_query_attention ? static_cast<double>(n.num_query_groups) : d.heads;
  d.kv_channels = static_cast<double>(n.kv_channels.value_or(*n.hidden_size / *n.num_attention_heads));
  d.tp = static_cast<int>(a.distributed.tensor_model_parallel_size);
  d.cp = static_cast<int>(a.distributed.context_parallel_size);
  d.pp = static_cast<int>(a.distributed.pipeline_model_parallel_size);
  d.dp = static_cast<int>(a.derived.data_parallel_size);
  d.sp = a.training.sequence_parallel;
  d.act_bytes = activation_element_bytes(a);
  return d;
}

double tp_seconds_per_layer(const dims& d, const system_spec& system) {
  const double bytes = d.b * d.s / d.cp * d.h * d.act_bytes;
  const process_group_shape tp{d.tp, 1};
  // A reduce-scatter costs what the all-gather of its output does.
  return tp_collectives_per_layer(d) * (d.sp ? all_gather_seconds(system, tp, bytes) : all_reduce_seconds(system, tp, bytes));
}

layer_time time_of_layer(const config::megatron_args& a, const system_spec& system, double forward_flops,
                         layer_shape shape, double rate) {
  const dims d = dims_of(a);
  const double shards = static_cast<double>(d.tp) * d.cp;
  const bool moe = shape.moe;
  layer_time t;
  // The attention core at the system's attention_efficiency where it has one, the rest at `rate`.
  const double core_flops = shape.attention ? core_attention_flops(a) / shards : 0;
  const auto at_attention_rate = [&](double flops, double efficiency) {
    return efficiency > 0 ? flops / rate * system.compute_efficiency / efficiency : flops / rate;
  };
  t.core_attention = at_attention_rate(core_flops, system.attention_efficiency_forward);
  t.core_attention_backward = at_attention_rate(2 * core_flops, system.attention_efficiency_backward);
  t.compute = (forward_flops / shards - core_flops) / rate + t.core_attention;
  const double tp = d.tp > 1 ? tp_seconds_per_layer(d, system) * shape.tp_share : 0;
  t.tp = a.training.tp_comm_overlap ? std::max(0.0, tp - (t.compute - t.core_attention)) : tp;
  if (shape.mamba) {
    t.cp_forward = t.cp_backward = mamba_context_parallel_exchange_seconds(a, system);  // and on the gradients back
  } else if (shape.attention) {
    const cp_core_overhead tiles = cp_attention_core_overhead(a, system);  // context_parallel_cost.hpp
    t.ring_tiles_forward = tiles.forward * t.core_attention;
    t.ring_tiles_backward = tiles.backward * t.core_attention_backward;
    const cp_exchange_time cp = cp_attention_exchange(a, system, t.core_attention + t.ring_tiles_forward);
    t.cp_forward = cp.forward;
    t.cp_backward = cp.backward;
  }
  t.ep = moe ? moe_exchange_seconds(a, system) : 0;
  t.ep_backward = moe ? t.ep - moe_delayed_wgrad_hidden_seconds(a, system, rate) : 0;
  if (system.memory_efficiency > 0) {
    const auto bytes = layer_elementwise_bytes(a, {shape.attention || shape.mamba, shape.attention, shape.mlp, moe});
    const double bandwidth = system.memory_bandwidth_Bps * system.memory_efficiency;
    t.elementwise = bytes.total() / bandwidth;
    t.score_elementwise = bytes.attention_scores / bandwidth;
  }
  const bool sequence_exchange = d.cp > 1 && (shape.attention || shape.mamba);
  const int experts = moe ? static_cast<int>(a.moe.expert_model_parallel_size) : 1;
  const int tied = d.tp * (sequence_exchange ? d.cp : 1) * experts;
  t.sync_wait = slowest_rank_wait_seconds(system, tied, t.compute + t.ring_tiles_forward + t.elementwise);
  // Each direction: the tensor-parallel collectives tp_seconds_per_layer counts (with sequence
  // parallelism 2 all-gathers and 2 reduce-scatters, else 2 all-reduces), the context-parallel
  // exchanges, and MoE's dispatch and combine.
  const double tp_syncs = d.tp > 1 ? tp_collectives_per_layer(d) * shape.tp_share : 0;
  t.tp_sync_forward = t.tp_sync_backward = synchronization_wait_seconds(system, d.tp, tp_syncs);
  if (shape.mamba && d.cp > 1) {
    const double exchanges = static_cast<double>(mamba_context_parallel_exchange_bytes(a).size());
    t.cp_sync_forward = t.cp_sync_backward = synchronization_wait_seconds(system, d.cp, exchanges);
  } else if (shape.attention && d.cp > 1) {
    const cp_synchronizations cp_syncs = cp_attention_synchronizations(a);
    t.cp_sync_forward = synchronization_wait_seconds(system, d.cp, cp_syncs.forward);
    t.cp_sync_backward = synchronization_wait_seconds(system, d.cp, cp_syncs.backward);
  }
  t.ep_sync = synchronization_wait_seconds(system, experts, moe && experts > 1 ? 2 : 0);
  t.wait_group = d.tp > 1 ? layer_time::waits_in::tp : sequence_exchange ? layer_time::waits_in::cp : layer_time::waits_in::ep;
  return t;
}

// The chunk's compute and exposed communication: `count` layers of each kind (decoder layers
// first, MTP depths after; only decoder layers are recomputed, as with Megatron's full recompute).
void add_layers(chunk_cost& c, const layer_time& t, double count, double recomputed_share, bool selective) {
  c.forward_s += count * t.forward();
  c.backward_s += count * (2 * (t.compute - t.core_attention + t.elementwise + t.sync_wait) + t.core_attention_backward +
                           t.ring_tiles_backward + t.fixed_waits_backward() +
                           (selective ? t.core_attention + t.ring_tiles_forward + t.score_elementwise : 0) + t.tp +
                           t.cp_backward + t.ep_backward) +
                  recomputed_share * count * t.forward();
  const double wait_forward = count * t.sync_wait, wait_backward = count * (2 + recomputed_share) * t.sync_wait;
  using w = layer_time::waits_in;
  (t.wait_group == w::tp ? c.forward_tp_s : t.wait_group == w::cp ? c.forward_cp_s : c.forward_ep_s) += wait_forward;
  (t.wait_group == w::tp ? c.backward_tp_s : t.wait_group == w::cp ? c.backward_cp_s : c.backward_ep_s) += wait_backward;
  c.weight_grad_s += count * (t.compute - t.core_attention);  // dW repeats each linear's forward GEMM
  c.forward_tp_s += count * (t.tp + t.tp_sync_forward);
  c.backward_tp_s += count * (t.tp + t.tp_sync_backward) + recomputed_share * count * (t.tp + t.tp_sync_forward);
  c.forward_cp_s += count * (t.cp_forward + t.cp_sync_forward);
  c.backward_cp_s += count * (t.cp_backward + t.cp_sync_backward) + recomputed_share * count * (t.cp_forward + t.cp_sync_forward);
  c.forward_ep_s += count * (t.ep + t.ep_sync);
  c.backward_ep_s += count * (t.ep_backward + t.ep_sync) + recomputed_share * count * (t.ep + t.ep_sync);
}

}  // namespace mactor::simulate
