// The context-parallel attention exchanges of each --cp-comm-type, priced on the CP group's links.
#include "simulate/context_parallel_cost.hpp"

#include <algorithm>
#include <string>

#include "simulate/collectives.hpp"
#include "simulate/layer_kinds.hpp"

namespace mactor::simulate {
namespace {

// One rank's shapes: its positions (batch x sequence / cp), the heads and key/value heads its
// tensor-parallel shard holds, and the bytes of an element.
struct cp_shapes {
  double rows, heads, groups, head_dim, bytes;
  int tp, cp, a2a_size;
};

cp_shapes shapes_of(const config::megatron_args& a) {
  const auto& n = a.network_size;
  cp_shapes s{};
  s.tp = static_cast<int>(a.distributed.tensor_model_parallel_size);
  s.cp = static_cast<int>(a.distributed.context_parallel_size);
  s.rows = static_cast<double>(a.training.micro_batch_size.value_or(1)) * static_cast<double>(*a.data.seq_length) / s.cp;
  const double heads = static_cast<double>(*n.num_attention_heads);
  const double groups = n.group_query_attention ? static_cast<double>(n.num_query_groups) : heads;
  s.heads = heads / s.tp;
  s.groups = groups / std::min<double>(groups, s.tp);
  s.head_dim = static_cast<double>(n.kv_channels.value_or(*n.hidden_size / *n.num_attention_heads));
  s.bytes = activation_element_bytes(a);
  const auto& levels = a.distributed.hierarchical_context_parallel_sizes;
  s.a2a_size = levels && !levels->empty() ? static_cast<int>(levels->front()) : 1;
  return s;
}

// Ring attention over `members` ranks spaced `stride` apart, each block the local keys and values.
cp_exchange_time ring(const cp_shapes& s, const system_spec& system, int members, int stride, double core_s) {
  const double block = 2 * s.rows * s.groups * s.head_dim * s.bytes;
  const double steps = (members - 1) * transfer_seconds(ring_link(system, {members, stride}), block);
  const double exposed = std::max(0.0, steps - core_s);
  return {exposed, 2 * exposed};
}

// Ulysses' two all-to-alls (qkv to heads, the context back) over `members` ranks at `stride`;
// the backward moves the same bytes.
cp_exchange_time ulysses(const cp_shapes& s, const system_spec& system, int members, int stride) {
  const double qkv = s.rows * (s.heads + 2 * s.groups) * s.head_dim * s.bytes;
  const double context = s.rows * s.heads * s.head_dim * s.bytes;
  const process_group_shape group{members, stride};
  const double t = all_to_all_seconds(system, group, qkv) + all_to_all_seconds(system, group, context);
  return {t, t};
}

cp_exchange_time exchange_of(const std::string& type, const cp_shapes& s, const system_spec& system, double core_s) {
  if (type == "a2a") return ulysses(s, system, s.cp, s.tp);
  if (type == "allgather") {
    const double whole = 2 * s.rows * s.groups * s.head_dim * s.bytes * s.cp;  // every rank's keys and values
    const double t = all_gather_seconds(system, {s.cp, s.tp}, whole);
    return {t, t};  // the gradients' reduce-scatter takes as long
  }
  if (type == "a2a+p2p") {
    const int a = s.a2a_size, p = s.cp / a;
    const cp_exchange_time inner = ulysses(s, system, a, s.tp);
    // After the all-to-all a rank holds 1 / a of the heads on a times the positions: the ring's
    // blocks are as large as p2p's, over p ranks spaced tp * a apart.
    const cp_exchange_time outer = ring(s, system, p, s.tp * a, core_s);
    return {inner.forward + outer.forward, inner.backward + outer.backward};
  }
  return ring(s, system, s.cp, s.tp, core_s);
}

cp_synchronizations synchronizations_of(const std::string& type, const cp_shapes& s) {
  const double cp = s.cp;
  if (type == "a2a") return {2, 2};
  if (type == "allgather") return {1, 1};
  if (type == "a2a+p2p") {
    const double p = cp / s.a2a_size;
    return {2 + (p - 1), 2 + p};
  }
  return {cp - 1, cp};
}

// The core's overhead of a ring over `ring_size` ranks: tiles of seq / (2 ring_size) positions.
cp_core_overhead ring_overhead(const config::megatron_args& a, const system_spec& system, int ring_size) {
  const double chunk = static_cast<double>(*a.data.seq_length) / (2.0 * ring_size);
  const ring_tile_point r = ring_attention_efficiency_at(system, chunk);
  return {1 / r.forward - 1, 1 / r.backward - 1};
}

cp_core_overhead core_overhead_of(const std::string& type, const cp_shapes& s, const config::megatron_args& a,
                                  const system_spec& system) {
  if (type == "p2p") return ring_overhead(a, system, s.cp);
  if (type == "a2a+p2p") return s.cp / s.a2a_size > 1 ? ring_overhead(a, system, s.cp / s.a2a_size) : cp_core_overhead{};
  return {};
}

// `of(type)` for the layers' --cp-comm-type (MLA always allgather, none given p2p), averaged
// over a per-layer list: what each attention layer's exchanges cost, or how often they synchronize.
template <class Each, class Of>
Each per_layer_mean(const config::megatron_args& a, Of of) {
  if (a.network_size.multi_latent_attention) return of("allgather");
  const auto& types = a.distributed.cp_comm_type;
  if (types.empty()) return of("p2p");
  Each mean;
  for (const auto& type : types) {
    const Each t = of(type);
    mean.forward += t.forward / static_cast<double>(types.size());
    mean.backward += t.backward / static_cast<double>(types.size());
  }
  return mean;
}

}  // namespace

cp_synchronizations cp_attention_synchronizations(const config::megatron_args& a) {
  const cp_shapes s = shapes_of(a);
  if (s.cp <= 1) return {};
  return per_layer_mean<cp_synchronizations>(a, [&](const std::string& type) { return synchronizations_of(type, s); });
}

cp_core_overhead cp_attention_core_overhead(const config::megatron_args& a, const system_spec& system) {
  const cp_shapes s = shapes_of(a);
  if (s.cp <= 1) return {};
  return per_layer_mean<cp_core_overhead>(
      a, [&](const std::string& type) { return core_overhead_of(type, s, a, system); });
}

cp_exchange_time cp_attention_exchange(const config::megatron_args& a, const system_spec& system, double core_attention_s) {
  const cp_shapes s = shapes_of(a);
  if (s.cp <= 1) return {};
  return per_layer_mean<cp_exchange_time>(
      a, [&](const std::string& type) { return exchange_of(type, s, system, core_attention_s); });
}

}  // namespace mactor::simulate
