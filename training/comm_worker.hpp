// A thread that runs collectives in the background, in the order they are posted (the same
// order on every member of a group, as collectives require). --overlap-grad-reduce posts each
// gradient bucket's reduction as soon as the backward has finished it; --overlap-param-gather
// posts the parameter all-gathers after the optimizer step. The stage waits before it needs the
// results, and never uses a communicator the worker may be using meanwhile.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace mactor::training {

class comm_worker {
 public:
  comm_worker();
  ~comm_worker();  // waits for what is posted; drops an error nobody waited for
  comm_worker(const comm_worker&) = delete;
  comm_worker& operator=(const comm_worker&) = delete;

  /// Runs `job` after every job posted before it. After a job threw, later ones are skipped.
  void post(std::function<void()> job);
  /// Blocks until every posted job has run; rethrows the first error (once).
  void wait();
  /// True while posted jobs have not all finished.
  bool busy() const;

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> jobs_;
  bool running_job_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace mactor::training
