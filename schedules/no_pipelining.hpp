// Gradient accumulation on a single pipeline stage (Megatron-Core forward_backward_no_pipelining).
#pragma once

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// F0 B0 F1 B1 ... F(m-1) B(m-1) on chunk 0, no transfers (only F with forward_only). Under
/// s.combined_1f1b (training), Megatron's combined_1f1b_schedule_for_no_pipelining: F0, then each
/// forward paired with the previous micro-batch's backward, F1 B0 F2 B1 ... F(m-1) B(m-2), then
/// B(m-1).
/// Megatron holds the data-parallel gradient sync back until the last backward; a port can tell
/// that one by microbatch == m - 1.
generator<action> no_pipelining(schedule_shape s);

}  // namespace mactor::schedules
