// Time of one collective or point-to-point transfer on a process group, by the alpha-beta model:
// which link a group's ring crosses follows from where its ranks sit (Megatron's default order
// tp-cp-ep-dp-pp puts tp innermost, so a group of n ranks at stride k stays in one node when
// n * k <= accelerators per node), and NCCL's ring formulas give the bytes each rank moves.
#pragma once

#include "simulate/system_spec.hpp"

namespace mactor::simulate {

/// n ranks spaced `stride` apart in the global rank order.
struct process_group_shape {
  int size = 1;
  int stride = 1;
};

/// The link a ring over the group crosses at its slowest hop: inside a node when the whole group
/// fits in one, across nodes otherwise (every accelerator has its own NIC, DGX-style).
const link_spec& ring_link(const system_spec& system, process_group_shape group);

/// Ring all-reduce of `bytes` per rank: 2 (n-1)/n bytes over the link, 2 (n-1) steps.
double all_reduce_seconds(const system_spec& system, process_group_shape group, double bytes);

/// Ring reduce-scatter or all-gather whose *full* (unsharded) buffer is `bytes`: (n-1)/n bytes,
/// n-1 steps. The two take the same time.
double all_gather_seconds(const system_spec& system, process_group_shape group, double bytes);

/// All-to-all of `bytes` per rank: 1/n of it to each peer, one message each, the peers in the
/// rank's node over the intra-node link and the others over the NIC at the same time (the slower
/// of the two).
double all_to_all_seconds(const system_spec& system, process_group_shape group, double bytes);

/// One message of `bytes` over `link`.
double transfer_seconds(const link_spec& link, double bytes);

}  // namespace mactor::simulate
