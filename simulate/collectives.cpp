// The alpha-beta ring formulas (Thakur et al. 2005; NCCL's "bus bandwidth" convention).
#include "simulate/collectives.hpp"

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
  const double n = group.size;
  return ring_seconds(system, group, n - 1, (n - 1) / n * bytes);
}

double transfer_seconds(const link_spec& link, double bytes) {
  if (bytes <= 0) return 0;
  return link.latency_s + bytes / link.bandwidth_Bps;
}

}  // namespace mactor::simulate
