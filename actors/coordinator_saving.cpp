// The coordinator's checkpoints: Megatron's save_checkpoint over every rank's checkpointer, one
// save at a time, and what training waits for before it goes on.
#include <caf/all.hpp>

#include "actors/coordinator_state.hpp"
#include "checkpoint/non_persistent.hpp"
#include "training/result_validation.hpp"

namespace mactor::actors::coordination {
namespace {

// Runs the continuation of the save in flight once the save allows it.
void maybe_go_on(coordinator_actor* self) {
  auto& s = self->state;
  if (!s.after_save || s.captured_left > 0) return;
  const bool async = s.args.checkpointing.async_save.value_or(false);
  if (!async && s.saved_left > 0) return;
  // Megatron's save-checkpoint timer (level 0, printed after every save): what each rank spent
  // before it could train again (the snapshot, and without --async-save the write and commit too).
  std::vector<training::rank_timings> timings;
  for (std::size_t r = 0; r < s.capture_seconds.size(); ++r)
    timings.push_back({static_cast<int>(r), {s.capture_seconds[r] + (async ? 0.0 : s.write_seconds[r])}});
  send_logger(self, log_timers{{"save-checkpoint"}, std::move(timings)});
  ft_checkpointing_end(self);
  auto then = std::move(s.after_save);
  s.after_save = nullptr;
  then();
}

void save_done(coordinator_actor* self) {
  auto& s = self->state;
  for (const auto removed : s.removed_non_persistent)
    log(self, "  removed non-persistent checkpoint from iteration " + iteration_field(removed) + " at " + s.save_directory);
  s.removed_non_persistent.clear();
  log(self, "  successfully saved checkpoint from iteration " + iteration_field(s.save_iteration) + " to " +
                s.save_directory + layout_field(*s.groups));
  if (s.deleted_iteration > 0)  // --save-retain-interval removed the checkpoint tracked before
    log(self, "  successfully deleted checkpoint from iteration " + iteration_field(s.deleted_iteration) + " at " +
                  *s.args.checkpointing.save);
  s.deleted_iteration = 0;
  s.saving = false;
  if (s.args.logging.log_progress) log_progress_save(self);
  maybe_go_on(self);
  if (s.finished) return;
  if (auto next = std::move(s.queued_save)) {
    s.queued_save = nullptr;
    next();
  } else if (s.finish_when_saved) {
    auto outcome = std::move(*s.finish_when_saved);
    s.finish_when_saved.reset();
    finish(self, std::move(outcome));
  }
}

}  // namespace

// Whether --save-interval saves after this iteration (validation makes the interval > 0 with --save).
bool interval_save_at(const config::megatron_args& a, std::int64_t iteration) {
  return a.checkpointing.save && a.checkpointing.save_interval.value_or(0) > 0 &&
         iteration % *a.checkpointing.save_interval == 0;
}

// Megatron's save_checkpoint: every rank snapshots its state and its checkpointer writes it.
// `then` runs once training may go on: when every rank's snapshot is taken with --async-save,
// when every rank's shards are durable and the iteration committed without.
// Megatron's checkpoint_and_decide_exit: a non-persistent save only where the persistent one is not.
bool non_persistent_save_at(const config::megatron_args& a, std::int64_t iteration) {
  const auto interval = a.checkpointing.non_persistent_save_interval.value_or(0);
  return a.checkpointing.save && interval > 0 && iteration % interval == 0 && !interval_save_at(a, iteration);
}

void save_then(coordinator_actor* self, std::function<void()> then, bool non_persistent) {
  auto& s = self->state;
  if (s.saving) {  // the next save waits for the previous one
    s.queued_save = [self, then = std::move(then), non_persistent]() mutable {
      save_then(self, std::move(then), non_persistent);
    };
    return;
  }
  const auto& ck = s.args.checkpointing;
  s.save_directory = !non_persistent ? *ck.save
                     : ck.non_persistent_ckpt_type == std::optional<std::string>("local")
                         ? ck.non_persistent_local_ckpt_dir.value_or(*ck.save)
                         : checkpoint::non_persistent_dir(ck.non_persistent_global_ckpt_dir, *ck.save);
  log(self, "saving checkpoint at iteration " + iteration_field(s.iteration) + " to " + s.save_directory + " in " +
                ck.ckpt_format + " format");
  s.saving = true;
  if (s.ft) s.ft->checkpointing_start(clock_type::now());
  s.save_iteration = s.iteration;
  s.save_consumed = s.consumed;
  s.save_floating_point_operations = s.floating_point_operations;
  if (s.inspect) s.inspect->coordinator_activity("saving the checkpoint of iteration " + std::to_string(s.iteration), s.iteration);
  s.captured_left = s.saved_left = static_cast<int>(s.stages.size());
  s.capture_seconds.assign(s.stages.size(), 0.0);
  s.write_seconds.assign(s.stages.size(), 0.0);
  s.after_save = std::move(then);
  broadcast(self, s.stages,
            save_checkpoint{s.iteration, s.consumed, s.skipped, s.floating_point_operations, s.save_directory, non_persistent});
}

void on_checkpoint_captured(coordinator_actor* self, const checkpoint_captured& c) {
  auto& s = self->state;
  // Not `s.saving`: a rank's checkpointer may report its write done (a local checkpoint on tmpfs
  // takes no time) before its stage reports the snapshot taken; the save is then over, but
  // training waits for this message to go on.
  if (!s.after_save || c.iteration != s.save_iteration) return;
  if (c.rank >= 0 && c.rank < static_cast<int>(s.capture_seconds.size())) s.capture_seconds[c.rank] = c.seconds;
  --s.captured_left;
  maybe_go_on(self);
}

void on_checkpoint_saved(coordinator_actor* self, const checkpoint_saved& c) {
  auto& s = self->state;
  if (!c.ok) {
    fail(self, 1, c.error);
    return;
  }
  if (!s.saving || c.iteration != s.save_iteration) return;
  if (c.rank >= 0 && c.rank < static_cast<int>(s.write_seconds.size())) s.write_seconds[c.rank] = c.seconds;
  if (c.deleted_iteration > 0) s.deleted_iteration = c.deleted_iteration;
  if (!c.removed_non_persistent.empty()) s.removed_non_persistent = c.removed_non_persistent;
  if (--s.saved_left == 0) save_done(self);
}

// Megatron's training loop after a train_step that the result validation ended: the iteration
// is not counted; the checkpoint (of the last completed iteration) is saved when asked, and the
// job exits with the validation's code.
void end_on_result_validation(coordinator_actor* self) {
  auto& s = self->state;
  --s.iteration;
  s.timings.clear();
  s.memory.clear();
  const int code = s.rerun_exit_code;
  auto leave = [self, code] {
    fail(self, code,
         "the result validation (--rerun-mode validate_results) ended the job with exit code " + std::to_string(code) +
             (code == training::exit_code_resume_to_disambiguate
                  ? " (EXIT_CODE_RESUME_TO_DISAMBIGUATE: resume from the checkpoint to rerun the iteration)"
                  : " (EXIT_CODE_FAILED_ON_RESULT_VALIDATION)"));
  };
  if (s.rerun_checkpoint && s.args.checkpointing.save)
    save_then(self, leave);
  else
    leave();
}

// --ckpt-convert-format: Megatron's setup_model_and_optimizer saves the loaded checkpoint in the
// new format under <--ckpt-convert-save>/<format> and exits before training. (Every rank's worker
// captures in that format when it sees --ckpt-convert-format: rank_worker::capture_checkpoint.)
void convert_checkpoint_and_exit(coordinator_actor* self) {
  auto& ck = self->state.args.checkpointing;
  const std::string from = ck.ckpt_format, to = *ck.ckpt_convert_format;
  ck.ckpt_format = to;  // --save is already <--ckpt-convert-save>/<format> (validate_parallel.cpp)
  save_then(self, [self, from, to] {
    log(self, "> converted checkpoint: " + from + " -> " + to + ".");
    finish_ok(self);
  });
}

}  // namespace mactor::actors::coordination
