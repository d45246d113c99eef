// The waiting policy and the adaptive poll.
#include "comm/wait_spin.hpp"

#include <algorithm>
#include <cstdlib>

namespace mactor::comm {

wait_spin wait_spin_policy(int local_ranks, int cores, const char* setting) {
  if (setting && *setting)  // checked by detect_launch_env
    return wait_spin(std::chrono::microseconds(std::atol(setting)), false);
  // The waiting thread is its rank's one running thread (the progress thread is parked): with
  // a core per rank, polling takes nothing another rank needs.
  return wait_spin(local_ranks <= cores ? default_wait_spin : std::chrono::microseconds(0), true);
}

wait_spin& wait_spin::operator=(const wait_spin& other) {
  base_ = other.base_;
  adaptive_ = other.adaptive_;
  recent_ns_.store(other.recent_ns_.load());
  return *this;
}

std::chrono::microseconds wait_spin::next() const {
  if (!adaptive_) return base_;
  const std::chrono::nanoseconds recent(recent_ns_.load(std::memory_order_relaxed));
  if (recent > max_adaptive_spin) return base_;
  return std::clamp(std::chrono::round<std::chrono::microseconds>(recent * 5 / 4), base_,
                    max_adaptive_spin);
}

void wait_spin::record(std::chrono::nanoseconds waited) {
  if (!adaptive_) return;
  // Average over the last few waits (weight 1/4); a race between two waiters loses one sample.
  const std::int64_t old = recent_ns_.load(std::memory_order_relaxed);
  recent_ns_.store(old + (waited.count() - old) / 4, std::memory_order_relaxed);
}

}  // namespace mactor::comm
