// The generations of a job under in-job restart (in_job_restart.hpp): each has its own rendezvous
// store, job id, master port and restart count. The launcher starts new ranks with them; a
// surviving rank's new image reads its variables from <dir>/rank_N.env when it restarts in place.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/rendezvous_server.hpp"
#include "tools/launcher/job_runner.hpp"

namespace mactor::tools {

class job_generations {
 public:
  /// Generation 0 is the job as `plan` and `first_store` start it.
  job_generations(const job_plan& plan, comm::rendezvous_server& first_store);
  ~job_generations();  ///< removes the folder of variable files
  job_generations(const job_generations&) = delete;
  job_generations& operator=(const job_generations&) = delete;

  /// Makes the folder of variable files (in-job restart is on).
  void enable();
  /// The folder (MACTOR_RESTART_IN_PLACE_DIR); "" until enable().
  const std::string& dir() const { return dir_; }
  /// In-job restarts so far.
  int number() const { return number_; }
  const job_identity& identity() const { return identity_; }
  comm::rendezvous_server& store() { return *store_; }
  /// The first generation's store, which lives as long as the launcher: remote supervisors watch
  /// it for the job's abort and their ranks' restarts (remote_restart.hpp).
  comm::rendezvous_server& control_store() { return first_store_; }
  /// Rank `rank`'s variables ("KEY=VALUE" lines) in this generation, slot_of as rank_env's.
  std::vector<std::string> env_lines(int rank, const std::vector<int>& slot_of) const;

  /// The next generation: a fresh store, job id, master port and restart count, and every rank's
  /// variables in its file; slot_of[r]: the layout place rank r's process sits in.
  void next(const std::vector<int>& slot_of);
  /// Whether `rank` has joined this generation: its image published its transport address in this
  /// generation's store (in generation 0, every rank counts as joined).
  bool joined(int rank) const;

 private:
  const job_plan& plan_;
  job_identity identity_;
  comm::rendezvous_server& first_store_;
  comm::rendezvous_server* store_;
  std::vector<std::unique_ptr<comm::rendezvous_server>> later_stores_;
  std::string dir_;
  int number_ = 0;
};

}  // namespace mactor::tools
