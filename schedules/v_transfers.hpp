// The transfers of a compute order on the V placement (ZB-V, DualPipeV): each compute's receive
// posted ahead of it, its send right after it.
#pragma once

#include <vector>

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// `compute` (forwards, backwards, weight passes of one rank, in order) with the transfers: the
/// receive of each compute posted two computes ahead (so the transfer overlaps the computes
/// between), its send right after it. Activations flow up the ranks on chunk 0 and down on chunk
/// 1; rank pp - 1's chunk 0 feeds its own chunk 1 (the port hands that tensor over locally);
/// gradients flow back the other way. Receives and sends of one link keep the micro-batch order
/// of the computes at both ends.
generator<action> with_v_transfers(schedule_shape s, std::vector<action> compute);

/// An order laid out for more micro-batches than the shape has (the fixed V orders need a
/// minimum), less the actions of the missing ones; forward_only keeps the forwards alone.
std::vector<action> for_shape(const schedule_shape& s, const std::vector<action>& laid_out);

}  // namespace mactor::schedules
