// The coordinator's progress reports: Megatron's batch ramp-up messages and --log-progress's
// progress.txt lines; and the iterations --iterations-to-skip passes over.
#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "actors/coordinator_state.hpp"
#include "training/progress_log.hpp"

namespace mactor::actors::coordination {

// --iterations-to-skip: Megatron's loop passes over an iteration whose number (the iterations
// done so far) is listed: its batch is consumed and counted as skipped, nothing trains, logs,
// evaluates or saves. False once training is over.
bool skip_listed_iterations(coordinator_actor* self) {
  auto& s = self->state;
  const auto& skip = s.args.training.iterations_to_skip;
  while (s.iteration < *s.args.training.train_iters &&
         std::find(skip.begin(), skip.end(), s.iteration) != skip.end()) {
    const std::int64_t batch = s.batches.running_global_batch_size(s.consumed);
    s.consumed += batch;
    s.skipped += batch;
    ++s.iteration;
  }
  return s.iteration < *s.args.training.train_iters;
}

// Megatron's RampupBatchsizeNumMicroBatchesCalculator.update(verbose=True) messages.
void announce_batch_size(coordinator_actor* self) {
  auto& s = self->state;
  if (!s.args.training.rampup_batch_size) return;
  const auto& plan = s.batches;
  const std::int64_t now = plan.current_global_batch_size(s.consumed);
  if (now == s.ramp_batch_size) return;
  log(self, s.ramp_batch_size == 0 ? "setting initial batch size to " + std::to_string(now)
                                   : "ramping up batch size from " + std::to_string(s.ramp_batch_size) + " to " +
                                         std::to_string(now));
  const std::int64_t running = plan.running_global_batch_size(s.consumed);
  if (running != now)
    log(self, "decreasing batch size from " + std::to_string(now) + " to " + std::to_string(running) +
                  " to keep divisiblity by micro_batch_size=" + std::to_string(plan.micro_batch_size) +
                  " * data_parallel_size=" + std::to_string(plan.data_parallel_size));
  s.ramp_batch_size = now;
}

// --log-progress: Megatron's append_to_progress_log("Starting job") (only with --save).
void log_progress_start(coordinator_actor* self) {
  auto& s = self->state;
  s.job_start = clock_type::now();
  if (!s.args.checkpointing.save) return;
  const char* job_id = std::getenv("SLURM_JOB_ID");
  try {
    training::append_progress(*s.args.checkpointing.save,
                              training::progress_line(std::chrono::system_clock::now(), job_id ? job_id : "",
                                                      s.args.derived.world_size, "Starting job"));
  } catch (const std::exception& e) {
    log(self, std::string("WARNING: --log-progress: ") + e.what());
  }
}

// --log-progress: Megatron's compute_throughputs_and_append_to_progress_log after a save.
void log_progress_save(coordinator_actor* self) {
  auto& s = self->state;
  const std::string& dir = *s.args.checkpointing.save;
  const char* job_id = std::getenv("SLURM_JOB_ID");
  try {
    const auto now = std::chrono::system_clock::now();
    const auto start = training::progress_start_of(training::read_progress(dir), s.args.derived.world_size);
    training::saved_progress p;
    p.iteration = s.save_iteration;
    p.async_save = s.args.checkpointing.async_save.value_or(false);
    p.floating_point_operations = s.save_floating_point_operations;
    p.floating_point_operations_at_start = s.floating_point_operations_at_start;
    p.job_seconds = std::chrono::duration<double>(clock_type::now() - s.job_start).count();
    p.cumulative_seconds = std::chrono::duration<double>(now - start.time).count();
    p.cumulative_start_operations = start.floating_point_operations;
    p.world_size = s.args.derived.world_size;
    p.tokens = s.save_consumed * s.args.data.seq_length.value_or(0);
    training::append_progress(dir, training::progress_line(now, job_id ? job_id : "", p.world_size,
                                                           training::saved_progress_text(p)));
  } catch (const std::exception& e) {
    log(self, std::string("WARNING: --log-progress: ") + e.what());
  }
}

}  // namespace mactor::actors::coordination
