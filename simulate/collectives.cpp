// The alpha-beta ring formulas (Thakur et al. 2005; NCCL's "bus bandwidth" convention).
#include "simulate/collectives.hpp"

#include <algorithm>

namespace mactor::simulate {
namespace {

// `steps` ring steps moving `moved` bytes in all through the group's link at the collectives'
// share of its bandwidth.
double ring_seconds(const system_spec& system, process_group_shape group, double steps, double moved) {
  if (group.size <= 1) return 0;
  const link_spec& link = ring_link(system, group);
  return steps * link.latency_s + moved / (link.bandwidth_Bps * system.collective_efficiency);
}

}  // namespace

const link_spec& ring_link(const system_spec& system, process_group_shape group) {
  const long span = static_cast<long>(group.size) * group.stride;
  return span <= system.accelerators_per_node ? system.intra_node : system.inter_node;
}

double all_reduce_seconds(const system_spec& system, process_group_shape group, double bytes) {
  const double n = group.size;
  return ring_seconds(system, group, 2 * (n - 1), 2 * (n - 1) / n * bytes);
}

double all_gather_seconds(const system_spec& system, process_group_shape group, double bytes) {
  const double n = group.size;
  return ring_seconds(system, group, n - 1, (n - 1) / n * bytes);
}

double all_to_all_seconds(const system_spec& system, process_group_shape group, double bytes) {
  if (group.size <= 1) return 0;
  // Not a ring: each rank sends 1/n of its bytes to every peer directly, its node's peers over
  // the intra-node link and the others through its NIC at the same time.
  const double n = group.size;
  const double per_node = std::max(1L, std::min<long>(group.size, system.accelerators_per_node / std::max(1, group.stride)));
  const double near = per_node - 1, far = n - per_node;
  const auto part = [&](const link_spec& link, double peers) {
    return peers > 0 ? peers * link.latency_s + peers / n * bytes / (link.bandwidth_Bps * system.collective_efficiency) : 0;
  };
  return std::max(part(system.intra_node, near), part(system.inter_node, far));
}

double transfer_seconds(const link_spec& link, double bytes) {
  if (bytes <= 0) return 0;
  return link.latency_s + bytes / link.bandwidth_Bps;
}

}  // namespace mactor::simulate
