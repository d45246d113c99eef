// The processes of one job as the trainer sees them: a rendezvous, the UCX data plane between
// every rank, and the data-parallel communicator (tp = pp = cp = 1 for now).
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/launch_env.hpp"

namespace mactor::training {

class job_world {
 public:
  /// Joins the job's rendezvous and connects every rank over UCX. Throws comm::comm_error or
  /// comm::rendezvous_error naming the rank or the store that failed.
  explicit job_world(const comm::launch_env& env);
  ~job_world();
  job_world(const job_world&) = delete;
  job_world& operator=(const job_world&) = delete;

  comm::communicator& data_parallel() { return *dp_; }

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  comm::communicator* dp_ = nullptr;
};

}  // namespace mactor::training
