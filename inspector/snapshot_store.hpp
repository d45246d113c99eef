// Where the coordinator keeps what its actors last reported, so that the inspector's snapshot
// callback is a cheap copy. An actor reports when its activity starts, not while it lasts: a
// stalled actor sends nothing more, so the store ages each activity itself when read.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "inspector/job_snapshot.hpp"

namespace mactor::inspector {

class snapshot_store {
 public:
  using clock = std::chrono::steady_clock;

  /// Activities starting with "awaiting" that last longer than stall_threshold_s go into the
  /// snapshot's stalls (find_stalls).
  explicit snapshot_store(double stall_threshold_s = 30.0);

  /// Adds or replaces the actor named status.name. Its activity began at activity_since;
  /// status.activity_seconds is ignored (computed when read).
  void report(actor_status status, clock::time_point activity_since = clock::now());
  /// Forgets an actor (it exited, or was swapped out).
  void remove(const std::string& name);
  void set_iteration(std::int64_t iteration, std::int64_t train_iters);
  void set_last_iteration_timeline(std::vector<timeline_event> events);
  void set_expert_load(std::int64_t iteration, std::vector<expert_load_row> rows);

  /// The snapshot as of now: activity_seconds = now - activity_since, uptime from construction,
  /// stalls filled. Thread-safe, like every member.
  job_snapshot snapshot(clock::time_point now = clock::now()) const;

 private:
  struct entry {
    actor_status status;
    clock::time_point since;
  };
  mutable std::mutex mutex_;
  double stall_threshold_s_;
  clock::time_point started_ = clock::now();
  std::int64_t iteration_ = 0, train_iters_ = 0;
  std::map<std::string, entry> actors_;  // by name
  std::vector<timeline_event> timeline_;
  std::int64_t expert_load_iteration_ = 0;
  std::vector<expert_load_row> expert_load_;
};

}  // namespace mactor::inspector
