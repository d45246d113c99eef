// The trace port: executes a schedule by writing its actions down. `mactor schedule` prints
// what it recorded; tests compare it with hand-written action strings.
#pragma once

#include <string>
#include <vector>

#include "schedules/action.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// Records every action it is asked to execute; every action "finishes" at once.
class trace_port {
 public:
  void execute(const action& a) { actions_.push_back(a); }

  /// Everything executed, in order.
  const std::vector<action>& actions() const { return actions_; }
  /// Only forward and backward (what `mactor schedule` prints without --with-p2p).
  std::vector<action> compute_actions() const;
  /// `to_string` of actions() or of compute_actions().
  std::string text(bool with_p2p) const;

 private:
  std::vector<action> actions_;
};

/// Runs make_schedule(s) through a trace port and returns what it recorded.
std::vector<action> trace(schedule_shape s);

/// trace(s) for every rank of the pipeline (s.pipeline_rank is ignored), rank 0 first.
std::vector<std::vector<action>> trace_all_ranks(schedule_shape s);

}  // namespace mactor::schedules
