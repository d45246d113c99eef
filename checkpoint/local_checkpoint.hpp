// Local non-persistent checkpoints (--non-persistent-ckpt-type local): each rank keeps its own
// whole training state under <local dir>/rank_N, one committed iter_NNNNNNN directory per save
// (the committed directory is the rank's completion marker), with no metadata shared between
// ranks. A load takes the newest iteration every rank holds complete.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mactor::checkpoint {

/// How many complete local checkpoints a rank keeps: the newest, and the one before it until every
/// rank may have finished the newest (a rank that died while saving it leaves only the older one
/// common to all).
inline constexpr int local_checkpoints_kept = 2;

/// The rank's own directory: <dir>/rank_<rank>.
std::string local_rank_dir(const std::string& dir, int rank);

/// The iterations of the committed iter_NNNNNNN directories in `dir`, oldest first (none when
/// the directory does not exist); interrupted saves' temporary directories are not among them.
std::vector<std::int64_t> complete_iterations(const std::string& dir);

/// The newest iteration present in every rank's list; nullopt when there is none (or no rank).
std::optional<std::int64_t> newest_common_iteration(const std::vector<std::vector<std::int64_t>>& per_rank);

}  // namespace mactor::checkpoint
