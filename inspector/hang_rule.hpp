// The rule that declares ranks hung (--distributed-timeout-minutes, and
// --distributed-timeout-seconds-after-init once the first iteration is done): the coordinator
// feeds it the stages' status reports and asks it on every refresh. Like torch.distributed's
// timeout it is per wait: a rank is hung when one wait (or one step) lasts past the timeout, not
// when it is merely slow.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "inspector/job_snapshot.hpp"

namespace mactor::inspector {

class hang_rule {
 public:
  using clock = std::chrono::steady_clock;

  /// `init_timeout_s` holds until the first iteration after start is done, then
  /// `after_init_timeout_s` when given (Megatron's update_pg_timeout after iteration start+1).
  /// `check_period_s`: how often the coordinator calls check() (its status tick).
  hang_rule(double init_timeout_s, std::optional<double> after_init_timeout_s, double check_period_s = 0.5);

  /// The coordinator's iteration count (completed iterations); the first value is the start.
  /// When the first iteration after it is done, the shorter timeout starts: every rank's clock
  /// starts over then (its quiet time so far was judged by the longer one; a rank whose first
  /// report is still on its way after a long start-up is not hung).
  void iteration(std::int64_t completed, clock::time_point at = clock::now());
  double timeout_s() const;

  /// A stage status report from `rank` arrived (its process runs and reaches the coordinator).
  void heard_from(int rank, clock::time_point at = clock::now());

  /// Lines naming each rank that made no progress for the timeout, and what it was doing; empty
  /// when none. A rank is hung when (a) its status reports stopped for the timeout (the process is
  /// stopped or cut off: a SIGSTOP, a dead link), or (b) its stage has been in one activity that
  /// is not "idle" for the timeout (one wait for a transfer or collective, or one step of its
  /// schedule: a stuck kernel). Idle stages wait on the coordinator, which (a) and (b) cover on
  /// the ranks it waits for; a checkpoint write is judged by (a) only (its progress is its
  /// process running). A gap between two calls longer than half the timeout, and longer than two
  /// check periods (the coordinator itself was not running), restarts every clock instead of
  /// judging reports still queued; a timeout of a second or two is thus judged too.
  std::vector<std::string> check(const job_snapshot& snapshot, clock::time_point now = clock::now());

 private:
  double init_timeout_s_;
  std::optional<double> after_init_timeout_s_;
  double check_period_s_;
  std::optional<std::int64_t> start_iteration_;
  bool initialized_ = false;
  std::map<int, clock::time_point> heard_;
  std::optional<clock::time_point> last_check_;
};

}  // namespace mactor::inspector
