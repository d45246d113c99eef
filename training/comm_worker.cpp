// The background collective thread.
#include "training/comm_worker.hpp"

#include <utility>

#include "comm/watched_communicator.hpp"

namespace mactor::training {

comm_worker::comm_worker() : thread_([this] { run(); }) {}

comm_worker::~comm_worker() {
  {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return jobs_.empty() && !running_job_; });
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void comm_worker::post(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void comm_worker::wait() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return jobs_.empty() && !running_job_; });
  if (auto e = std::exchange(error_, nullptr)) std::rethrow_exception(e);
}

bool comm_worker::busy() const {
  std::lock_guard lock(mu_);
  return !jobs_.empty() || running_job_;
}

void comm_worker::run() {
  comm::mark_background_thread();  // the inspector tells its collectives from the training thread's
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop_ with nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    running_job_ = true;
    const bool skip = error_ != nullptr;
    lock.unlock();
    std::exception_ptr failure;
    if (!skip) {
      try {
        job();
      } catch (...) {
        failure = std::current_exception();
      }
    }
    lock.lock();
    if (failure && !error_) error_ = failure;
    running_job_ = false;
    if (jobs_.empty()) idle_.notify_all();
  }
}

}  // namespace mactor::training
