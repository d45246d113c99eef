// DualPipeV (DeepSeek, "DualPipe" repository: the cut-in-half DualPipe of DeepSeek-V3): the V
// placement of ZB-V (rank r holds virtual stages r and 2 pp - 1 - r) with DualPipe's order, in
// which one chunk's forward is paired with the other chunk's backward (on a GPU the two overlap,
// one's compute hiding the other's expert-parallel all-to-all) and only the warm-up and cool-down
// backwards leave their weight gradients for later.
#pragma once

#include <vector>

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// The compute order of rank r (pp = p, m >= 2p micro-batches; F0/F1 = forward of chunk 0/1,
/// B = backward, "zb" = input gradient only with its weight pass W queued, else B is followed by
/// its W at once; W runs the oldest queued weight pass):
///   1. 2(p - r - 1) x F0
///   2. (r + 1) x (F0 F1)
///   3. (p - r - 1) x (B1 zb, W, F1)
///   4. (m - 2p + r + 1) x (F0 B1 F1 B0)          the steady pairs
///   5. (p - r - 1) x (B1, F1 B0)
///   6. (r + 1) x (B1 B0), zb from the middle on (odd ranks from B1, even ranks from B0)
///   7. (p - r - 1) x (W, B0 zb)
///   8. the (r + 1) W left.
/// Training needs m >= 2p (validate refuses fewer, as DeepSeek's code does). forward_only: the
/// forwards of the order laid out for max(m, 2p) micro-batches, those of the missing ones dropped.
std::vector<action> dual_pipe_v_compute(const schedule_shape& s);

/// dual_pipe_v_compute with the transfers of with_v_transfers (schedules/v_transfers.hpp).
/// Precondition: validate(s) is empty.
generator<action> dual_pipe_v(schedule_shape s);

}  // namespace mactor::schedules
