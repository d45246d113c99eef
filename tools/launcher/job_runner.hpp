// Runs a mapped job to its end with mpirun's semantics: the first rank to fail (non-zero exit or
// a signal) brings the others down (SIGTERM, then SIGKILL after the grace period), and mactor
// exits with that rank's status, naming it. Signals to mactor are forwarded; stdin goes to rank 0.
#pragma once

#include <string>
#include <vector>

#include "comm/rendezvous_server.hpp"
#include "tools/launcher/host_map.hpp"
#include "tools/launcher/in_job_restart.hpp"
#include "tools/launcher/launch_options.hpp"
#include "tools/launcher/rank_env.hpp"

namespace mactor::tools {

struct job_plan {
  launch_options opts;
  job_layout layout;
  job_identity identity;
  std::vector<bool> host_is_local;  ///< per host: start directly rather than through the agent
  std::string remote_mactor;        ///< mactor's path on remote hosts
  in_job_restart_policy in_job;     ///< from the program's --inprocess-* arguments
};

/// How a job ended.
struct job_result {
  int exit_code = 0;    ///< mactor's exit status
  bool stopped = false; ///< ended by --timeout or a forwarded signal, not by a rank's failure
};

/// Starts every rank and waits for the job.
job_result run_job(const job_plan& plan, comm::rendezvous_server& store);

}  // namespace mactor::tools
