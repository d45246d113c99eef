// hang_rule: which ranks made no progress for the distributed timeout (see hang_rule.hpp).
#include "inspector/hang_rule.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "inspector/stall_report.hpp"

namespace mactor::inspector {
namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

const actor_status* stage_of(const job_snapshot& snapshot, int rank) {
  for (const auto& a : snapshot.actors)
    if (a.kind == "stage" && a.rank == rank) return &a;
  return nullptr;
}

bool is_idle(const std::string& activity) { return activity.rfind("idle", 0) == 0; }

}  // namespace

hang_rule::hang_rule(double init_timeout_s, std::optional<double> after_init_timeout_s, double check_period_s)
    : init_timeout_s_(init_timeout_s), after_init_timeout_s_(after_init_timeout_s), check_period_s_(check_period_s) {}

void hang_rule::iteration(std::int64_t completed, clock::time_point at) {
  if (!start_iteration_) start_iteration_ = completed;
  if (completed <= *start_iteration_ || initialized_) return;
  initialized_ = true;
  if (after_init_timeout_s_)
    for (auto& [rank, heard] : heard_) heard = std::max(heard, at);
}

double hang_rule::timeout_s() const {
  return initialized_ && after_init_timeout_s_ ? *after_init_timeout_s_ : init_timeout_s_;
}

void hang_rule::heard_from(int rank, clock::time_point at) { heard_[rank] = at; }

std::vector<std::string> hang_rule::check(const job_snapshot& snapshot, clock::time_point now) {
  const double timeout = timeout_s();
  const auto limit = std::chrono::duration<double>(timeout);
  // Half the timeout, but not less than two checks' spacing: with a 1 s timeout and a 0.5 s tick
  // every gap would otherwise restart the clocks, and a stopped rank would never be named.
  const auto not_running = std::max(limit / 2, std::chrono::duration<double>(2 * check_period_s_));
  if (last_check_ && now - *last_check_ > not_running) {
    for (auto& [rank, at] : heard_) at = now;  // the coordinator was not running: start over
  }
  last_check_ = now;
  std::vector<std::string> lines;
  std::set<int> silent;
  for (const auto& [rank, at] : heard_) {
    const double quiet = std::chrono::duration<double>(now - at).count();
    if (quiet <= timeout) continue;
    silent.insert(rank);
    const actor_status* stage = stage_of(snapshot, rank);
    lines.push_back("rank " + std::to_string(rank) + " sent no status for " + seconds_text(quiet) +
                    " s (its process is stopped or cut off); its stage was last: " +
                    (stage ? stage->activity : std::string("unknown")));
  }
  // Waits past the timeout, with the peer waited for and what that peer does.
  for (const auto& line : find_stalls(snapshot, timeout)) {
    const int rank = std::atoi(line.c_str() + 5);  // "rank N ..."
    if (!silent.count(rank)) lines.push_back(line);
  }
  for (const auto& a : snapshot.actors) {
    if (a.kind != "stage" || silent.count(a.rank) || is_idle(a.activity)) continue;
    if (a.activity.rfind("awaiting", 0) == 0 || a.activity_seconds <= timeout) continue;
    lines.push_back("rank " + std::to_string(a.rank) + " stage made no progress for " +
                    seconds_text(a.activity_seconds) + " s in: " + a.activity);
  }
  return lines;
}

}  // namespace mactor::inspector
