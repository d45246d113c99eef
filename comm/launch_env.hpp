// Rank discovery: reads this process's place in the job from whichever launcher started it
// (mactor, Open MPI's mpirun, Slurm's srun, torchrun, MPICH's PMI), or a single process if none.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace mactor::comm {

/// Which launcher's variables the launch_env was read from.
enum class launcher_kind { none, mactor, open_mpi, torchrun, slurm, pmi };

/// The launcher's name as users write it: "mactor", "mpirun", "torchrun", "srun", "pmi", "none".
const char* launcher_name(launcher_kind k);

/// This process's place in the job.
struct launch_env {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        ///< rank among the processes on this node
  int local_world_size = 1;  ///< processes on this node
  int node_rank = 0;         ///< index of this node among the job's nodes
  launcher_kind launcher = launcher_kind::none;
  std::string rdzv_addr;     ///< "host:port" of mactor's key-value store (MACTOR_RDZV_ADDR), or ""
  std::string master_addr;   ///< MASTER_ADDR, or ""
  int master_port = 0;       ///< MASTER_PORT, or 0
  std::string job_id;        ///< MACTOR_JOB_ID / SLURM_JOB_ID / TORCHELASTIC_RUN_ID / Open MPI's jobid
};

/// A launcher's variables that are present but unusable (not a number, rank >= size, ...).
struct launch_env_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Looks a variable up; returns nullopt when unset. Tests pass a map; programs use process_env().
using env_getter = std::function<std::optional<std::string>(const char*)>;

/// Reads the real process environment (std::getenv).
env_getter process_env();

/// Finds the launcher by its variables, most specific first: MACTOR_*, OMPI_COMM_WORLD_*,
/// torchrun's (RANK with LOCAL_RANK or TORCHELASTIC_RUN_ID), SLURM_PROCID, PMI_RANK.
/// Throws launch_env_error naming the variable when a value is malformed or inconsistent, and
/// when mactor's data-plane settings (MACTOR_HUGE_PAGES, MACTOR_UCX_SPIN_US) are malformed.
launch_env detect_launch_env(const env_getter& get);

/// One line for logs: "rank 3/8 (local 1/2 on node 1) via mpirun".
std::string describe(const launch_env& e);

}  // namespace mactor::comm
