// The stage's activity, and how a collective in progress overrides it.
#include "training/stage_activity.hpp"

#include "comm/watched_communicator.hpp"

namespace mactor::training {

void stage_activity::set(std::string what) {
  std::lock_guard lock(mutex_);
  what_ = std::move(what);
  since_ = clock_type::now();
}

stage_activity::background_wait::background_wait(stage_activity& a, std::string why) : activity_(a) {
  std::lock_guard lock(a.mutex_);
  a.what_ = "awaiting " + why;
  a.since_ = clock_type::now();
  a.background_why_ = std::move(why);
}

stage_activity::background_wait::~background_wait() {
  std::lock_guard lock(activity_.mutex_);
  activity_.background_why_.clear();
}

std::pair<std::string, stage_activity::clock_type::time_point> stage_activity::describe(
    const std::vector<const comm::watched_communicator*>& watched) const {
  std::pair<std::string, clock_type::time_point> now;
  std::string why;
  {
    std::lock_guard lock(mutex_);
    now = {what_, since_};
    why = background_why_;
  }
  // On the training thread, a collective is the activity itself; on the background thread, it
  // is what the training thread waits for while it waits.
  for (const auto* w : watched) {
    auto call = w->current();
    if (!call) continue;
    if (!call->background) return {"awaiting " + call->what, call->since};
    if (!why.empty()) return {"awaiting " + call->what + " (" + why + ")", now.second};
  }
  return now;
}

}  // namespace mactor::training
