// Spawn functions of the training actors (each defined in its own source file).
#pragma once

#include <caf/fwd.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "actors/job_control.hpp"
#include "comm/process_groups.hpp"
#include "config/megatron_args.hpp"
#include "training/checkpoint_replication.hpp"
#include "training/parallel_context.hpp"
#include "training/rank_worker.hpp"

namespace mactor::actors {

class stage_reporter;
class side_activity;

/// Where and as whom a rank's checkpointer saves.
struct checkpoint_job_settings {
  std::string save_dir;
  int rank = 0, world_size = 1;
  std::string attempt_id;  ///< the job id: names the iteration's temporary directory
  std::optional<std::int64_t> retain_interval;  ///< --save-retain-interval
  /// --non-persistent-ckpt-type local: a non-persistent save goes to <its directory>/rank_N alone.
  bool local_non_persistent = false;
  /// --replication: after each local save, the copies exchanged with the clique's peers.
  std::shared_ptr<training::checkpoint_replicator> replicator;
};

/// The stage actor of this rank (detached: it blocks in collectives). Builds its rank_worker from
/// the config message, runs iterations and evaluations its replica actor asks for, and records
/// what it does in `reporter` (inspection.hpp), which its status actor reports.
caf::actor spawn_stage(caf::actor_system& sys, training::parallel_context& ctx, std::shared_ptr<job_control> control,
                       caf::actor checkpointer, std::shared_ptr<stage_reporter> reporter);
/// The same stage on the actor system's scheduler instead of a thread of its own: for a test that
/// drives one rank (world size 1, so it never waits in a collective) with CAF's test scheduler.
caf::actor spawn_scheduled_stage(caf::actor_system& sys, training::parallel_context& ctx, std::shared_ptr<job_control> control,
                                 caf::actor checkpointer, std::shared_ptr<stage_reporter> reporter);
/// This rank's checkpointer (detached: it writes files): saves the snapshots its stage hands it,
/// one after another, and reports each to the coordinator.
/// What it does is kept in `activity` for the inspector.
caf::actor spawn_checkpointer(caf::actor_system& sys, checkpoint_job_settings settings,
                              std::shared_ptr<side_activity> activity);
/// The replica actor of data-parallel replica `replica`: fans iterations out to its stages and
/// merges their reports for the coordinator.
caf::actor spawn_replica(caf::actor_system& sys, int replica);
/// This rank's agent: ends the process's wait on an abort, on stop, or when the coordinator is
/// gone (pass an invalid handle on rank 0, whose coordinator ends the job itself).
caf::actor spawn_agent(caf::actor_system& sys, std::shared_ptr<job_control> control, int rank, const caf::actor& coordinator);
/// The logger (rank 0): Megatron's training lines, validation blocks and TensorBoard scalars.
/// Throws std::runtime_error when its writer cannot start (e.g. an unwritable --tensorboard-dir).
caf::actor spawn_logger(caf::actor_system& sys, const config::megatron_args& args, std::FILE* out, int world_size,
                        std::int64_t padded_vocab_size);
/// The evaluator (rank 0): decides when to evaluate which split and formats the results.
caf::actor spawn_evaluator(caf::actor_system& sys, const config::megatron_args& args);
/// The coordinator (rank 0): owns the config, meets every rank, starts iterations and
/// evaluations, watches every rank, and ends the job.
caf::actor spawn_coordinator(caf::actor_system& sys, const config::megatron_args& args, const comm::process_groups& groups,
                             training::vocabulary vocab, caf::actor logger, caf::actor evaluator,
                             std::shared_ptr<job_control> control);

}  // namespace mactor::actors
