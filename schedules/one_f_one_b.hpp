// Non-interleaved 1F1B (PipeDream-Flush; Megatron-Core forward_backward_pipelining_without_interleaving).
#pragma once

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// Rank r runs w = min(pp - r - 1, m) warmup forwards, then alternates one forward and one
/// backward, then drains w backwards. Transfers are yielded where Megatron issues them:
/// RF before each forward (not on rank 0), SF after it (not on the last rank); in the steady
/// state SF+RB go out as one exchange after the forward and SB+RF as one after the backward.
generator<action> one_f_one_b(schedule_shape s);

}  // namespace mactor::schedules
