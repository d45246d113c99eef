// --replication: after a rank commits a local checkpoint, it sends it to each clique peer and
// keeps theirs (checkpoint/replication.hpp), on the checkpointer's thread while training goes on.
// The copies travel over the job's transport on their own tags (comm/pipeline_tags.hpp), so they
// never match a pipeline transfer or a collective.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/transport.hpp"

namespace mactor::training {

/// What one exchange moved.
struct replication_report {
  std::int64_t bytes_sent = 0, bytes_received = 0;
  std::vector<int> peers_without_copy;  ///< peers whose own save of the iteration failed
  double seconds = 0;
};

class checkpoint_replicator {
 public:
  /// `clique` is this rank's replication clique (itself included); `timeout` bounds each wait for
  /// a peer (--distributed-timeout-minutes).
  checkpoint_replicator(comm::transport& transport, std::string local_dir, int rank, std::vector<int> clique,
                        std::chrono::milliseconds timeout);

  /// Every member of the clique calls this for the same iterations, in the same order: sends this
  /// rank's committed `iteration` (none when `committed` is false: its save failed) to every peer,
  /// stores each peer's copy under replica_dir and keeps the newest local_checkpoints_kept of
  /// each. Throws comm::comm_error naming a peer that does not answer within the timeout, or
  /// checkpoint_error when a copy cannot be read or written.
  replication_report replicate(std::int64_t iteration, bool committed);

  const std::vector<int>& clique() const { return clique_; }

 private:
  comm::transport& transport_;
  std::string local_dir_;
  int rank_;
  std::vector<int> clique_;
  std::chrono::milliseconds timeout_;
  // This rank's packed copy and the peers' received ones, their memory reused from save to save.
  std::string packed_;
  std::vector<std::string> copies_;
};

}  // namespace mactor::training
