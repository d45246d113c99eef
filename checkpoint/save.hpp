// save(): every rank writes its own shard of an iteration; rank 0 commits the iteration once all
// ranks are done (metadata, common document, rename into place, tracker). See README.md for the
// protocol and why a crash at any point leaves the previous checkpoint loadable.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "checkpoint/tensor_piece.hpp"

namespace mactor::checkpoint {

struct save_options {
  /// Same on every rank and unique per job run (e.g. MACTOR_JOB_ID): names the temporary directory
  /// the ranks meet in, so files left by a crashed earlier run are never mistaken for this one's.
  std::string attempt_id;
  /// How long rank 0 waits for the other ranks' shards before failing with their numbers.
  std::chrono::milliseconds commit_timeout = std::chrono::minutes(10);
  /// Called on the saving thread before the first byte is written (tests, progress reports).
  std::function<void()> before_write;
  /// Megatron's --save-retain-interval: once the tracker names the new iteration, rank 0 deletes
  /// the previously tracked one unless it is a multiple of this (or a symbolic link).
  std::optional<std::int64_t> retain_interval;
  /// Told (on rank 0) the iteration a retain interval deleted.
  std::function<void(std::int64_t)> on_deleted;
};

/// Writes this rank's pieces of `iteration` under save_dir; on rank 0 (which must pass
/// state.common) also waits for every rank of world_size, then commits. Throws checkpoint_error
/// (bad pieces, I/O failures, ranks missing at the timeout). Never damages an earlier checkpoint.
void save(const std::string& save_dir, std::int64_t iteration, int rank, int world_size,
          const rank_state& state, const save_options& options = {});

}  // namespace mactor::checkpoint
