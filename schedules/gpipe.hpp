// GPipe (Huang et al. 2019): every forward, then every backward. Not one of Megatron's schedules.
#pragma once

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// RF F SF for microbatches 0..m-1, then RB B SB for 0..m-1 (ascending, like PyTorch's
/// ScheduleGPipe). Holds all m activations at the peak, against at most pp - r for 1F1B; the
/// same ideal bubble as 1F1B.
generator<action> gpipe(schedule_shape s);

}  // namespace mactor::schedules
