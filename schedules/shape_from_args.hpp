// The schedule shape a resolved command line gives one pipeline (rank 0's; sizes, microbatches,
// interleaving group and p2p overlap), for the tools that schedule without a training engine.
#pragma once

#include "config/megatron_args.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// pp, vp, m (Megatron's num_microbatches), the microbatch group size, the p2p overlap flags, the
/// kind (--pipeline-schedule) and combined_1f1b (--overlap-moe-expert-parallel-comm) of `a`;
/// rank 0, forward_only false, not validated (the caller sets the rest).
schedule_shape shape_from_args(const config::megatron_args& a);

}  // namespace mactor::schedules
