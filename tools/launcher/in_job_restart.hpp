// The launcher's half of in-job restart: a program started with Megatron's --inprocess-restart
// (NVIDIA Resiliency Extension's in-process restart) has its failed rank replaced while the job
// runs. The rank that died or hung is started again as a new process under its own rank; every
// other rank restarts in place (comm/restart_in_place.hpp) into a fresh rendezvous, and all roll
// back to the newest checkpoint they share. Hung ranks are found by the job's own hang rule.
#pragma once

#include <string>
#include <vector>

namespace mactor::tools {

struct in_job_restart_policy {
  bool enabled = false;
  int max_restarts = -1;  ///< --inprocess-max-iterations; -1: no limit (Megatron's default None)
  /// --inprocess-hard-timeout: a rank that has not joined a restart this long after it began is
  /// killed and started again (a process that cannot act on the restart signal).
  double hard_timeout_s = 90;
  /// --inprocess-active-world-size: the ranks of the job among the processes; the others are
  /// spares (NVRx's warm reserve). 0: not given (every process is a rank).
  int active_world_size = 0;
};

/// Read from the program's own arguments: --inprocess-restart, --inprocess-max-iterations N,
/// --inprocess-hard-timeout S and --inprocess-active-world-size N (or =N, =S). Throws usage_error naming a value that is not a number
/// of the kind the flag takes.
in_job_restart_policy in_job_restart_from(const std::vector<std::string>& program_argv);

/// A fresh folder for the per-generation variable files (<dir>/rank_N.env); removed with the job.
std::string make_restart_dir();

/// Writes `lines` ("KEY=VALUE") to `path` through a temporary file and a rename, so a rank that
/// reads it sees the whole file or none.
void write_env_file(const std::string& path, const std::vector<std::string>& lines);

}  // namespace mactor::tools
