// The snapshot as plain text for a terminal: what `mactor inspect` prints each refresh.
#pragma once

#include <string>

#include "inspector/job_snapshot.hpp"

namespace mactor::inspector {

/// A header with the iteration, one line per actor (kind, rank, activity and its seconds,
/// mailbox depth, messages/s, data-plane bytes), the last iteration's per-rank timeline drawn
/// `width` characters wide, and the stall lines. In the timeline each compute op is a run of
/// cells that starts with its label (F3 = forward of microbatch 3, B3.1 = backward of
/// microbatch 3 on chunk 1, opt, dp-sync), padded with '-'; transfers are not drawn. A MoE
/// model's tokens per expert follow (render_expert_load).
std::string render_text(const job_snapshot& snapshot, int width = 100);

/// "1.5 KiB"-style byte counts.
std::string format_bytes(std::int64_t bytes);

}  // namespace mactor::inspector
