// Megatron's non-persistent global checkpoints (--non-persistent-ckpt-type global): ordinary
// checkpoints under <save>/non_persistent (or --non-persistent-global-ckpt-dir), of which only the
// newest survive, and which a load prefers when they are at least as new as the persistent one.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mactor::checkpoint {

/// Megatron's _NON_PERSISTENT_CKPT_SUBDIR.
inline constexpr const char* non_persistent_subdir = "non_persistent";

/// The non-persistent directory: `global_dir` when given, else <base>/non_persistent.
std::string non_persistent_dir(const std::optional<std::string>& global_dir, const std::string& base);

/// Megatron's cleanup_old_non_persistent_checkpoint, run on rank 0 before each non-persistent
/// save: removes every committed iter_NNNNNNN directory of `dir` but the `keep` newest (so the
/// last complete checkpoint survives until the save after the one starting now). Returns the
/// iterations removed, oldest first; checkpoint_error when one cannot be removed.
std::vector<std::int64_t> remove_old_iterations(const std::string& dir, int keep);

}  // namespace mactor::checkpoint
