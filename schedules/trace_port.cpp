// The trace port and the helpers that run a schedule through it.
#include "schedules/trace_port.hpp"

#include "schedules/schedule.hpp"

namespace mactor::schedules {

std::vector<action> trace_port::compute_actions() const {
  std::vector<action> out;
  for (const action& a : actions_)
    if (is_compute(a.kind)) out.push_back(a);
  return out;
}

std::string trace_port::text(bool with_p2p) const {
  return to_string(with_p2p ? actions_ : compute_actions());
}

std::vector<action> trace(schedule_shape s) {
  trace_port port;
  run_schedule(make_schedule(s), port);
  return port.actions();
}

std::vector<std::vector<action>> trace_all_ranks(schedule_shape s) {
  std::vector<std::vector<action>> out;
  for (int r = 0; r < s.pipeline_model_parallel_size; ++r) {
    s.pipeline_rank = r;
    out.push_back(trace(s));
  }
  return out;
}

}  // namespace mactor::schedules
