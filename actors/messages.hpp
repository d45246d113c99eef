// The typed messages the training actors exchange (control only: tensors travel on the data
// plane). Includes CAF: include only from actors/ sources.
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/meta/type_name.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/snapshot_buffers.hpp"
#include "training/reports.hpp"

namespace mactor::checkpoint {
struct rank_state;
}

namespace mactor::actors {

/// A rank introduces its actors to the coordinator (replica is invalid where none lives).
struct hello_message {
  int rank = 0;
  caf::actor stage, agent, replica;
};

/// A stage has built its model from the config message (and read --load) and can start.
struct stage_ready {
  int rank = 0;
  int valid_sets = 0;     ///< validation sets to evaluate (several with --multiple-validation-sets)
  bool has_test = false;  ///< test data exists (and --eval-iters > 0)
  bool loaded = false;                       ///< a checkpoint was loaded
  std::int64_t saved_iteration = 0;          ///< the loaded checkpoint's iteration
  std::int64_t iteration = 0, consumed = 0;  ///< where training resumes (0 with --finetune)
  std::int64_t skipped = 0;                  ///< samples --iterations-to-skip passed over so far
  double floating_point_operations = 0;      ///< trained before (0 with --finetune)
  std::string load_directory;
};

/// The stages of one data-parallel replica, for its replica actor.
struct replica_setup {
  int replica = 0;
  std::vector<caf::actor> stages;
};

/// Run training iteration `iteration` (1-based) starting at `consumed` samples.
struct run_iteration {
  std::int64_t iteration = 0;
  std::int64_t consumed = 0;
};

/// Megatron's evaluation splits, numbered as its datasets are (0 is the training split).
inline constexpr int validation_split = 1;
inline constexpr int test_split = 2;

/// Evaluate one split (validation_split or test_split; `set`: which validation set) over
/// --eval-iters global batches, or the whole set with --full-validation.
struct run_evaluation {
  int split = validation_split;
  int set = 0;
};

/// Coordinator -> every stage: snapshot this rank's state after `iteration` (`consumed` samples)
/// and hand it to this rank's checkpointer.
struct save_checkpoint {
  std::int64_t iteration = 0;
  std::int64_t consumed = 0;
  std::int64_t skipped = 0;              ///< samples --iterations-to-skip passed over (kept too)
  double floating_point_operations = 0;  ///< trained so far (the checkpoint keeps it)
  /// Where it goes: --save, or the non-persistent directory (--non-persistent-save-interval).
  std::string directory;
  bool non_persistent = false;
};
/// Stage -> coordinator: the snapshot is taken; training may go on (--async-save).
struct checkpoint_captured {
  int rank = 0;
  std::int64_t iteration = 0;
  double seconds = 0;  ///< time the stage spent copying its state
};
/// Checkpointer -> coordinator: this rank's shards are durable (on rank 0: the iteration is
/// committed and the tracker names it), or the save failed.
struct checkpoint_saved {
  int rank = 0;
  std::int64_t iteration = 0;
  bool ok = true;
  std::string error;
  double seconds = 0;      ///< writing time
  std::int64_t bytes = 0;  ///< tensor bytes this rank wrote
  std::int64_t deleted_iteration = 0;  ///< rank 0: the checkpoint --save-retain-interval removed (0: none)
  std::vector<std::int64_t> removed_non_persistent;  ///< rank 0: older non-persistent iterations removed
};

/// Stage -> this rank's checkpointer (never leaves the process: the snapshot is shared, not
/// serialized): write `state` as iteration `iteration`, then report to reply_to.
struct checkpoint_write {
  std::shared_ptr<checkpoint::rank_state> state;
  std::int64_t iteration = 0;
  caf::actor reply_to;
  std::string directory;        ///< --save or the non-persistent directory
  bool non_persistent = false;  ///< rank 0 first removes all but the newest there; no retain interval
  /// Where the stage's next snapshot is copied: the checkpointer gives the state's buffers back
  /// once it is written (null: freed).
  std::shared_ptr<checkpoint::snapshot_buffers> buffers;
};

/// A completed transfer: the stage pumps its schedule again.
struct resume_message {};

/// The job ends: quit (stages and replicas).
struct stop_message {};

/// A rank failed; every rank's agent ends its process with this error.
struct abort_job {
  int rank = 0;       ///< the rank at fault
  int exit_code = 1;  ///< 2 for bad input, 1 otherwise
  std::string message;
  bool lost_peer = false;  ///< job_outcome::lost_peer
};

/// When the coordinator saw a record's event (the logger may print it later): nanoseconds of
/// steady_clock and system_clock. Both actors live on rank 0, so the steady clock is shared.
struct log_time {
  std::int64_t steady_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch()).count();
  std::int64_t wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
};

/// Lines and records for the logger (all sent by the coordinator, so they print in order).
struct log_line {
  std::string text;
  bool datetime = false;  ///< print as Megatron's print_datetime("text")
  log_time at;
};
struct log_iteration {
  training::iteration_report report;
  std::int64_t consumed = 0;
  std::int64_t skipped = 0;  ///< samples --iterations-to-skip passed over so far
  log_time at;
  /// Seconds since the last record sent that are not this iteration's training time (Megatron
  /// stops its interval timer while it evaluates or saves; iterations left unlogged go here too).
  double excluded_seconds = 0;
};
struct log_validation {
  std::string prefix;
  int set_index = -1;  ///< --multiple-validation-sets: the set (its blocks and tags say 'validation-<set>')
  double loss = 0;
  std::int64_t iteration = 0;
  std::int64_t consumed = 0;
};
/// Time outside training (evaluations, checkpoint saves) to leave out of the interval's
/// elapsed time, as Megatron stops its interval timer for them.
/// A timers block of its own (Megatron's timers.log without a normalizer), e.g. 'evaluate' before
/// each validation block: each rank's seconds[i] is timer names[i].
struct log_timers {
  std::vector<std::string> names;
  std::vector<training::rank_timings> timings;
};
/// --skip-train: no TensorBoard values.
struct log_drop_tensorboard {};

/// Coordinator -> evaluator: an iteration finished (reply: evaluation_plan).
struct iteration_done {
  std::int64_t iteration = 0;
  bool final = false;  ///< training is over: the final validation and test evaluations
};
/// Evaluator -> coordinator: the splits to evaluate now (validation_split, test_split), with
/// the prefix of each block.
struct evaluation_plan {
  std::vector<int> splits;
  std::vector<std::string> prefixes;
};
/// Coordinator -> evaluator: one evaluation's loss (reply: log_validation).
struct evaluation_result {
  int split = validation_split;
  std::string prefix;
  int set_index = -1;  ///< as log_validation's
  double loss = 0;
  std::int64_t iteration = 0;
  std::int64_t consumed = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hello_message& x) {
  return f(caf::meta::type_name("mactor::hello"), x.rank, x.stage, x.agent, x.replica);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_ready& x) {
  return f(caf::meta::type_name("mactor::stage_ready"), x.rank, x.valid_sets, x.has_test, x.loaded, x.saved_iteration,
           x.iteration, x.consumed, x.skipped, x.floating_point_operations, x.load_directory);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, save_checkpoint& x) {
  return f(caf::meta::type_name("mactor::save_checkpoint"), x.iteration, x.consumed, x.skipped,
           x.floating_point_operations, x.directory, x.non_persistent);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_captured& x) {
  return f(caf::meta::type_name("mactor::checkpoint_captured"), x.rank, x.iteration, x.seconds);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_saved& x) {
  return f(caf::meta::type_name("mactor::checkpoint_saved"), x.rank, x.iteration, x.ok, x.error, x.seconds, x.bytes,
           x.deleted_iteration, x.removed_non_persistent);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_setup& x) {
  return f(caf::meta::type_name("mactor::replica_setup"), x.replica, x.stages);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_iteration& x) {
  return f(caf::meta::type_name("mactor::run_iteration"), x.iteration, x.consumed);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_evaluation& x) {
  return f(caf::meta::type_name("mactor::run_evaluation"), x.split, x.set);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, resume_message&) {
  return f(caf::meta::type_name("mactor::resume"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stop_message&) {
  return f(caf::meta::type_name("mactor::stop"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, abort_job& x) {
  return f(caf::meta::type_name("mactor::abort_job"), x.rank, x.exit_code, x.message, x.lost_peer);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, log_line& x) {
  return f(caf::meta::type_name("mactor::log_line"), x.text, x.datetime, x.at.steady_ns, x.at.wall_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, log_iteration& x) {
  return f(caf::meta::type_name("mactor::log_iteration"), x.report, x.consumed, x.skipped, x.at.steady_ns, x.at.wall_ns,
           x.excluded_seconds);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, log_validation& x) {
  return f(caf::meta::type_name("mactor::log_validation"), x.prefix, x.set_index, x.loss, x.iteration, x.consumed);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, log_timers& x) {
  return f(caf::meta::type_name("mactor::log_timers"), x.names, x.timings);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, log_drop_tensorboard&) {
  return f(caf::meta::type_name("mactor::log_drop_tb"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, iteration_done& x) {
  return f(caf::meta::type_name("mactor::iteration_done"), x.iteration, x.final);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, evaluation_plan& x) {
  return f(caf::meta::type_name("mactor::evaluation_plan"), x.splits, x.prefixes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, evaluation_result& x) {
  return f(caf::meta::type_name("mactor::evaluation_result"), x.split, x.prefix, x.set_index, x.loss, x.iteration, x.consumed);
}

}  // namespace mactor::actors

namespace mactor::training {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_timings& x) {
  return f(caf::meta::type_name("mactor::rank_timings"), x.rank, x.seconds);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, straggler_sample& x) {
  return f(caf::meta::type_name("mactor::straggler_sample"), x.rank, x.forward_ms, x.batch_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_memory& x) {
  return f(caf::meta::type_name("mactor::rank_memory"), x.rank, x.data_parallel_first, x.allocated_bytes,
           x.max_allocated_bytes, x.reserved_bytes, x.max_reserved_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, iteration_report& x) {
  return f(caf::meta::type_name("mactor::iteration_report"), x.rank, x.iteration, x.has_loss, x.loss_sum, x.num_tokens,
           x.update_successful, x.loss_scale, x.has_grad_norm, x.grad_norm, x.has_num_zeros, x.num_zeros, x.has_params_norm,
           x.params_norm, x.learning_rate, x.has_decoupled_learning_rate, x.decoupled_learning_rate, x.seconds,
           x.global_batch_size, x.exit_signal, x.rerun_exit_code, x.rerun_checkpoint, x.energy_joules, x.energy_missing,
           x.timings, x.memory, x.moe_losses, x.mtp_losses, x.straggler);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, evaluation_report& x) {
  return f(caf::meta::type_name("mactor::evaluation_report"), x.rank, x.split, x.has_loss, x.loss_sum, x.num_tokens,
           x.timings);
}

}  // namespace mactor::training

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mactor::actors::checkpoint_write)
