// One rank's part of a training job as actors: the entry point pretrain_gpt calls after parsing.
// CAF-free header.
#pragma once

#include <caf/fwd.hpp>
#include <cstdio>
#include <string>

#include "comm/launch_env.hpp"
#include "config/megatron_args.hpp"
#include "training/parallel_context.hpp"
#include "training/reports.hpp"

namespace mactor::actors {

/// How the job ended for this rank. exit_code 0: trained (result filled on rank 0); 2: bad input;
/// 1: a runtime failure, `error` naming the rank at fault.
struct job_outcome {
  int exit_code = 0;
  std::string error;
  training::training_result result;
  /// The job ended because a peer rank is gone or unreachable (its process died, a transfer or
  /// collective with it failed, the coordinator vanished): under in-job restart the launcher
  /// replaces that rank and this one restarts in place.
  bool lost_peer = false;
};

/// Starts this rank's actor system: the stage actor (and the replica actor on a replica's first
/// rank) everywhere; the coordinator, logger and evaluator on rank 0, reachable by the other
/// ranks through CAF's middleman at the address rank 0 puts in the rendezvous store. Returns when
/// the job has ended. On failure the actor system is left running (a stage may be blocked in a
/// collective): the caller ends the process after reporting the error. After a clean end of a
/// multi-rank job the actor system is left running too: end the process with std::_Exit after
/// flushing (a single-process job shuts its system down).
job_outcome run_job(const config::megatron_args& args, const comm::launch_env& env, training::parallel_context& ctx,
                    std::FILE* out);

/// A rank's actor-system settings (run_job's, and the benchmarks' that measure it): mactor's
/// message types and a small scheduler whose idle workers sleep.
void configure_rank_system(caf::actor_system_config& cfg);

}  // namespace mactor::actors
