// --result-rejected-tracker-filename read back at start: the iterations a rerun found
// reproducibly wrong on one rank are added to --iterations-to-skip (Megatron's
// RerunStateMachine.get_skipped_iterations_from_tracker_file).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mactor::config {

struct tracker_skips {
  std::vector<std::int64_t> skip;    ///< sorted: failed twice on one rank, on no other rank
  std::vector<std::int64_t> ignore;  ///< sorted: failed on several ranks of one job, so not skipped
  std::string error;                 ///< why reading stopped early (file missing, bad number), else empty
};

/// Reads the tracker's lines: an iteration whose status is RERUN_DISABLED,
/// FIRST_RERUN_REPRODUCIBLE or SECOND_RERUN_REPRODUCIBLE on the same rank twice is skipped, unless
/// one job saw it on more than one rank. Reading stops at the first unreadable line (as Megatron's).
tracker_skips skipped_iterations_from_tracker(const std::string& path);

}  // namespace mactor::config
