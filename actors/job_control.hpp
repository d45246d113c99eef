// The one place a rank's actors report how the job ended; run_job waits on it. CAF-free.
#pragma once

#include <condition_variable>
#include <mutex>

#include "actors/job.hpp"

namespace mactor::actors {

class job_control {
 public:
  /// The first call decides the outcome; later ones are ignored (a failure seen twice).
  void finish(job_outcome outcome) {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = true;
    outcome_ = std::move(outcome);
    cv_.notify_all();
  }
  void fail(int exit_code, std::string message, bool lost_peer = false) {
    job_outcome o;
    o.exit_code = exit_code;
    o.error = std::move(message);
    o.lost_peer = lost_peer;
    finish(std::move(o));
  }
  /// True once the outcome is decided (a test's deterministic scheduler cannot block in wait()).
  bool done() {
    std::lock_guard lock(mu_);
    return done_;
  }
  job_outcome wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return outcome_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  job_outcome outcome_;
};

}  // namespace mactor::actors
