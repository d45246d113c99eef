// The coordinator's state and the functions its parts share: coordinator_actor.cpp (meeting the
// ranks, the iteration loop, evaluations, the end of the job) and coordinator_saving.cpp
// (checkpoints). Private to actors/.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include "actors/inspection.hpp"
#include "actors/logger_queue.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "actors/straggler_logging.hpp"
#include "config/microbatches.hpp"
#include "training/ft_integration.hpp"
#include "training/rank_worker.hpp"

namespace mactor::actors::coordination {

using clock_type = std::chrono::steady_clock;

struct coordinator_state {
  config::megatron_args args;
  std::unique_ptr<comm::process_groups> groups;
  training::vocabulary vocab;
  caf::actor logger, evaluator;
  logger_queue to_logger;  // the bound on the logger's mailbox (logger_queue.hpp)
  std::shared_ptr<job_control> control;
  std::vector<caf::actor> stages, agents, replicas;
  std::map<caf::actor_addr, int> rank_of;
  int hellos = 0, stages_ready = 0;  // ranks met, stages that sent stage_ready
  int valid_sets = -1;  // the fewest validation sets a stage reported (-1: none reported yet)
  bool has_test = true;
  std::int64_t iteration = 0, consumed = 0;
  std::int64_t skipped = 0;  // samples --iterations-to-skip passed over (Megatron's skipped_train_samples)
  config::microbatch_plan batches;    // each iteration's global batch (--rampup-batch-size)
  std::int64_t ramp_batch_size = 0;  // the ramp-up batch size last announced
  bool exit_signal = false;  // --exit-signal-handler: a rank got SIGTERM
  int rerun_exit_code = 0;   // --rerun-mode: the result validation ends the job with this code
  bool rerun_checkpoint = false;  // ... saving first
  double iteration_energy = 0, total_energy = 0;  // --log-energy: joules (this iteration's so far, all)
  bool energy_missing = false;                    // --log-energy: a host has no counter
  double floating_point_operations = 0;           // trained so far, checkpoints included
  double floating_point_operations_at_start = 0;  // ... when this job started (--log-progress)
  clock_type::time_point job_start;               // when this job's "Starting job" line was written
  std::int64_t save_consumed = 0;                 // the save in flight's consumed samples
  double save_floating_point_operations = 0;      // ... and FLOPs so far  // the --rampup-batch-size batch last announced
  std::size_t reports_pending = 0;  // replicas yet to report this iteration or evaluation
  training::iteration_report merged;
  std::vector<training::rank_timings> timings;  // every replica's, for the logger
  std::vector<training::rank_memory> memory;    // every rank's after the iteration, for the logger
  std::vector<training::straggler_sample> straggler_samples;  // every rank's, for --log-straggler
  std::unique_ptr<straggler_logging> straggler;  // --log-straggler (straggler_logging.hpp)
  training::evaluation_report eval_merged;
  evaluation_plan plan;
  std::size_t plan_index = 0;
  int plan_set = 0;  // the validation set the plan's current entry evaluates
  bool final_phase = false, finished = false;
  training::training_result result;
  clock_type::time_point train_start;
  std::unique_ptr<job_inspection> inspect;  // the inspector's endpoint and stall report (inspection.hpp)
  std::unique_ptr<training::ft_integration> ft;  // --enable-ft-package's sections (coordinator_fault_tolerance.cpp)
  std::optional<clock_type::time_point> iteration_end;  // the last iteration's report arrived
  clock_type::time_point iteration_start;
  double excluded_seconds = 0;  // not training time, since the last iteration record sent (log_iteration)
  // --load: what the stages found (every rank must agree).
  std::optional<stage_ready> loaded;
  std::string load_mismatch;
  // The save in flight (at most one: the next waits for it), and what runs once it allows.
  bool saving = false;
  std::int64_t save_iteration = 0;
  std::string save_directory;                         ///< where the save in flight goes
  std::vector<std::int64_t> removed_non_persistent;   ///< what its non-persistent clean-up removed
  std::int64_t deleted_iteration = 0;  // --save-retain-interval: the checkpoint the save removed
  int captured_left = 0, saved_left = 0;
  std::vector<double> capture_seconds, write_seconds;  // per rank, of the save in flight
  std::function<void()> after_save, queued_save;
  std::optional<job_outcome> finish_when_saved;
  static inline const char* name = "coordinator";
};

using coordinator_actor = caf::stateful_actor<coordinator_state>;

// Every message to the logger goes through here, so the coordinator knows how many wait.
template <class Message>
void send_logger(coordinator_actor* self, Message&& m) {
  self->state.to_logger.sent();
  self->send(self->state.logger, std::forward<Message>(m));
}

/// A line for the log (with Megatron's datetime stamp when `datetime`).
void log(coordinator_actor* self, std::string text, bool datetime = false);

void broadcast(coordinator_actor* self, const std::vector<caf::actor>& to, const auto& message) {
  for (const auto& a : to)
    if (a) self->send(a, message);
}

/// Ends the job with `outcome`: every rank's agent learns it; stages, replicas and observers quit.
void finish(coordinator_actor* self, job_outcome outcome);
/// lost_peer: job_outcome::lost_peer.
void fail(coordinator_actor* self, int exit_code, std::string message, bool lost_peer = false);
void finish_ok(coordinator_actor* self);

// The start of the job (coordinator_startup.cpp).
/// Sets up the coordinator's state, its inspector and the handler for ranks that vanish.
void start_coordinator(coordinator_actor* self, config::megatron_args args, comm::process_groups groups,
                       training::vocabulary vocab, caf::actor logger, caf::actor evaluator,
                       std::shared_ptr<job_control> control);
/// A rank's actors introduced themselves; once every rank has, the config goes to every stage and
/// each replica gets its pipeline's stages.
void on_hello(coordinator_actor* self, const hello_message& h);
/// A stage built its model and loaded the checkpoint, if any; once every stage has (and all agree
/// on what they loaded), training starts.
void on_stage_ready(coordinator_actor* self, const stage_ready& r);

void start_iteration(coordinator_actor* self);
/// "training ...", then the first iteration (or the end, when the loaded checkpoint is at --train-iters).
void begin_training(coordinator_actor* self);
void finish_training(coordinator_actor* self);
void after_iteration(coordinator_actor* self);
/// "%7lld", as Megatron prints an iteration in checkpoint lines.
std::string iteration_field(std::int64_t iteration);
/// The layout Megatron names after a checkpoint's path: " [ t 1/TP, p 1/PP ]".
std::string layout_field(const comm::process_groups& g);

// Progress reports (coordinator_progress.cpp): Megatron's ramp-up messages before an iteration,
// --log-progress's progress.txt lines when training starts and after each save.
void announce_batch_size(coordinator_actor* self);
/// --iterations-to-skip: passes over the listed iterations from here on; false once training is over.
bool skip_listed_iterations(coordinator_actor* self);
void log_progress_start(coordinator_actor* self);
void log_progress_save(coordinator_actor* self);

// --enable-ft-package (coordinator_fault_tolerance.cpp): Megatron's fault-tolerance sections.
/// Loads <save>/ft_state.json and opens "setup"; throws std::invalid_argument for a bad state file or timeout.
void start_fault_tolerance(coordinator_actor* self);
/// A save let training go on: closes "checkpointing" (and with --calc-ft-timeouts updates the timeouts).
void ft_checkpointing_end(coordinator_actor* self);
/// The job ends well: the last update of the timeouts.
void stop_fault_tolerance(coordinator_actor* self);
/// The error that ends the job when a section is open past its timeout, else nullopt.
std::optional<std::string> fault_tolerance_hang(coordinator_actor* self);

// Evaluations (coordinator_evaluation.cpp).
/// Asks the evaluator what to evaluate after this iteration (final: training is over), runs it.
void plan_evaluations(coordinator_actor* self, bool final);
/// Runs the plan's next split (or validation set), or goes on when the plan is done.
void next_evaluation(coordinator_actor* self);
void on_evaluation_report(coordinator_actor* self, const training::evaluation_report& r);

// Checkpoints (coordinator_saving.cpp).
bool interval_save_at(const config::megatron_args& a, std::int64_t iteration);
/// Whether --non-persistent-save-interval saves after this iteration (when the persistent one does not).
bool non_persistent_save_at(const config::megatron_args& a, std::int64_t iteration);
void save_then(coordinator_actor* self, std::function<void()> then, bool non_persistent = false);
/// --ckpt-convert-format: saves the loaded checkpoint in the other format, then ends the job.
void convert_checkpoint_and_exit(coordinator_actor* self);
/// --rerun-mode: the iteration's report says the result validation ends the job (saving first when asked).
void end_on_result_validation(coordinator_actor* self);
void on_checkpoint_captured(coordinator_actor* self, const checkpoint_captured& c);
void on_checkpoint_saved(coordinator_actor* self, const checkpoint_saved& c);

}  // namespace mactor::actors::coordination
