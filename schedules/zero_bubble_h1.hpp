// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B with the backward split
// into an input-gradient pass B and a weight-gradient pass W, the W passes moved into the bubble.
#pragma once

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// The forwards, backwards and transfers of 1F1B in 1F1B's order; backward computes only the
/// input gradient. Rank r runs the weight-gradient pass W of micro-batch k after the backward of
/// micro-batch k + r (W lags B by r), so the last rank runs pp - 1 of its W passes after its last
/// backward, in the time 1F1B leaves idle while the gradients travel to rank 0. A W comes just
/// before the next compute (after the transfers that follow its backward). In flight on rank r:
/// at most pp micro-batches whose W has not run (1F1B's pp - r plus the r deferred), the same
/// bound as 1F1B's first rank. Bubble with forward, backward and weight passes of t_f, t_b, t_w:
/// (pp - 1)(t_f + t_b - t_w) per rank for t_w <= t_f, against 1F1B's (pp - 1)(t_f + t_b + t_w).
/// forward_only: 1F1B's forward-only schedule.
generator<action> zero_bubble_h1(schedule_shape s);

}  // namespace mactor::schedules
