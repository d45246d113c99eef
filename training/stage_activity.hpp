// What a stage is doing right now, for the inspector and the stall report: set by the training
// thread (the engine, its pipeline port and its grad sync), read from any thread. Inside a
// collective, the collective in progress is what the stage waits for.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mactor::comm {
class watched_communicator;
}

namespace mactor::training {

class stage_activity {
 public:
  using clock_type = std::chrono::steady_clock;

  /// The stage now does `what` (e.g. "forward mb 3 chunk 0", "idle").
  void set(std::string what);

  /// While alive, the training thread waits for the background collectives, for `why` (e.g.
  /// "the overlapped gradient reduction"): the activity says so, naming the collective.
  class background_wait {
   public:
    background_wait(stage_activity& a, std::string why);
    ~background_wait();
    background_wait(const background_wait&) = delete;
    background_wait& operator=(const background_wait&) = delete;

   private:
    stage_activity& activity_;
  };

  /// The activity and since when; a collective in progress on one of `watched` (this rank's
  /// groups) takes precedence, e.g. "awaiting data-parallel all-reduce of 1.2 MiB with ranks 1, 2".
  std::pair<std::string, clock_type::time_point> describe(
      const std::vector<const comm::watched_communicator*>& watched) const;

 private:
  mutable std::mutex mutex_;
  std::string what_ = "idle";
  std::string background_why_;  // empty: not waiting for the background collectives
  clock_type::time_point since_ = clock_type::now();
};

}  // namespace mactor::training
