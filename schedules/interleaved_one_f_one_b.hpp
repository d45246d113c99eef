// Interleaved 1F1B (Narayanan et al. 2021; Megatron-Core forward_backward_pipelining_with_interleaving).
#pragma once

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// Each rank holds vp model chunks (chunk c runs virtual stage c * pp + rank). Forwards walk the
/// microbatches in groups of g: g microbatches on chunk 0, the same g on chunk 1, ..., then the
/// next group; the last group takes what is left (m % g of them). Backward number k runs the
/// microbatch of forward number k on the mirrored chunk vp - 1 - c. Rank r runs
/// min(2 (pp - r - 1) + (vp - 1) g, vp m) warmup forwards, then one forward + one backward per
/// step, then the remaining backwards.
///
/// Transfers follow Megatron-Core core_v0.15.0 with overlap_p2p_comm (its default) or without it
/// (--no-overlap-p2p-communication, batched p2p). Within one of Megatron's exchanges the order is
/// SB, RF, SF, RB (torch's batch_isend_irecv order). Under s.combined_1f1b (Megatron's
/// combined_1f1b_schedule_for_interleaved_pipelining, --overlap-moe-expert-parallel-comm) every
/// rank runs one more warmup forward, and with overlap each steady step's forward and backward
/// run back to back before its two exchanges (RF SF, then SB RB). Precondition: validate(s) is
/// empty.
generator<action> interleaved_one_f_one_b(schedule_shape s);

}  // namespace mactor::schedules
