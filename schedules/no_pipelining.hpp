// Gradient accumulation on a single pipeline stage (Megatron-Core forward_backward_no_pipelining).
#pragma once

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// F0 B0 F1 B1 ... F(m-1) B(m-1) on chunk 0, no transfers (only F with forward_only).
/// Megatron holds the data-parallel gradient sync back until the last backward; a port can tell
/// that one by microbatch == m - 1.
generator<action> no_pipelining(schedule_shape s);

}  // namespace mactor::schedules
