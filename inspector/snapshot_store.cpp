// snapshot_store: a mutex-guarded table of actor reports (see snapshot_store.hpp).
#include "inspector/snapshot_store.hpp"

#include <algorithm>
#include <tuple>

#include "inspector/stall_report.hpp"

namespace mactor::inspector {

snapshot_store::snapshot_store(double stall_threshold_s) : stall_threshold_s_(stall_threshold_s) {}

void snapshot_store::report(actor_status status, clock::time_point activity_since) {
  std::lock_guard lock(mutex_);
  std::string name = status.name;
  actors_[name] = {std::move(status), activity_since};
}

void snapshot_store::remove(const std::string& name) {
  std::lock_guard lock(mutex_);
  actors_.erase(name);
}

void snapshot_store::set_iteration(std::int64_t iteration, std::int64_t train_iters) {
  std::lock_guard lock(mutex_);
  iteration_ = iteration;
  train_iters_ = train_iters;
}

void snapshot_store::set_last_iteration_timeline(std::vector<timeline_event> events) {
  std::lock_guard lock(mutex_);
  timeline_ = std::move(events);
}

void snapshot_store::set_expert_load(std::int64_t iteration, std::vector<expert_load_row> rows) {
  std::lock_guard lock(mutex_);
  expert_load_iteration_ = iteration;
  expert_load_ = std::move(rows);
}

job_snapshot snapshot_store::snapshot(clock::time_point now) const {
  job_snapshot s;
  {
    std::lock_guard lock(mutex_);
    s.iteration = iteration_;
    s.train_iters = train_iters_;
    s.uptime_s = std::chrono::duration<double>(now - started_).count();
    for (const auto& [name, e] : actors_) {
      s.actors.push_back(e.status);
      s.actors.back().activity_seconds = std::max(0.0, std::chrono::duration<double>(now - e.since).count());
    }
    s.last_iteration_timeline = timeline_;
    s.expert_load_iteration = expert_load_iteration_;
    s.expert_load = expert_load_;
  }
  // Sorted by rank, kind and name, so rows keep their place between refreshes.
  std::stable_sort(s.actors.begin(), s.actors.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rank, a.kind, a.name) < std::tie(b.rank, b.kind, b.name);
  });
  s.stalls = find_stalls(s, stall_threshold_s_);
  return s;
}

}  // namespace mactor::inspector
