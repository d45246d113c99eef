// Megatron's training output on the printing rank: the per-interval training line, the
// validation blocks, print_datetime lines and the TensorBoard scalars, from merged reports.
// The logger actor owns one; a swapped-in logger takes over the interval state with state().
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/megatron_args.hpp"
#include "training/training_log.hpp"
#include "training/reports.hpp"
#include "training/tensorboard_writer.hpp"
#include "training/wandb_writer.hpp"

namespace mactor::training {

/// What a logger carries from one log line to the next (handed over on a swap).
struct log_interval_state {
  training_log_accumulator accumulator;
  std::chrono::steady_clock::time_point interval_start = std::chrono::steady_clock::now();
  /// The training timers' seconds since the last log line: [global rank][step_timer].
  std::vector<std::vector<double>> timer_seconds;
  /// Megatron prints each rank's memory once, after the first logged iteration.
  bool memory_reported = false;
  /// --log-energy: joules since the last log line; whether the no-counter warning was printed.
  double energy_joules = 0;
  bool energy_warned = false;
  /// --wandb-project: the W&B run (one per job: a swapped-in logger takes it over).
  std::shared_ptr<wandb_writer> wandb;
};

/// When a record's event happened, as the coordinator saw it: a logger that lags behind still
/// prints the iteration's own time and measures intervals between iterations, not between its
/// own prints.
struct record_time {
  std::chrono::steady_clock::time_point steady = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();
};

class log_writer {
 public:
  /// `args` may differ from the job's in the logging flags only (a swap); `out` may be null.
  log_writer(const config::megatron_args& args, std::FILE* out, int world_size, std::int64_t padded_vocab_size);
  ~log_writer();

  void print(const std::string& line);
  /// Megatron's print_datetime: "[what] datetime: YYYY-MM-DD HH:MM:SS ".
  void print_datetime(const std::string& what, record_time at = {});
  /// The args as TensorBoard text (write_args_to_tensorboard), once at the start of a job.
  void write_args();
  /// --wandb-project: starts the job's W&B run (throws std::runtime_error when wandb cannot
  /// start). Once per job: a swapped-in logger inherits the run with the interval state.
  void start_wandb();
  /// One finished iteration: the merged report (loss from the last stage, norms and rates from
  /// any rank) and the consumed samples after it. Prints the line every --log-interval.
  /// skipped_samples: those --iterations-to-skip passed over so far (printed and written when > 0).
  void iteration(const iteration_report& r, std::int64_t consumed_samples, record_time at = {},
                 std::int64_t skipped_samples = 0);
  /// Megatron's evaluate_and_print_results block (and its TensorBoard scalars).
  /// One validation block; `set_index` numbers it (and its tags) among --multiple-validation-sets.
  void validation(const std::string& prefix, double loss, std::int64_t iteration, std::int64_t consumed_samples,
                  std::optional<int> set_index = std::nullopt);
  /// Leaves `seconds` out of the current interval's elapsed time (Megatron stops its
  /// interval-time timer while it evaluates or saves a checkpoint).
  void exclude_time(double seconds) {
    state_.interval_start += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  }
  /// Megatron writes no TensorBoard values when only evaluating (--skip-train).
  void drop_tensorboard() { tb_.reset(); }
  void flush();
  /// The timers block Megatron prints after the training line (timers.log with
  /// --timing-log-option), from the interval's sums; nullopt when no timer ran.
  std::optional<std::string> timers_block() const;
  /// A timers block of its own, e.g. Megatron's level-0 'evaluate' before each validation block:
  /// each rank's seconds[i] is timer names[i], printed without a normalizer.
  void timers(const std::vector<std::string>& names, const std::vector<rank_timings>& timings);

  log_interval_state& state() { return state_; }
  const config::megatron_args& args() const { return args_; }

 private:
  void add_timings(const iteration_report& r);
  std::vector<timer_reading> timer_readings() const;
  void log_timers(std::int64_t iteration);
  void wandb_log(const std::string& key, double value, std::int64_t step);
  /// A scalar to TensorBoard (with --tensorboard-dir) and W&B (with --wandb-project) alike.
  void scalar(const std::string& tag, double value, std::int64_t step);
  void interval_scalars(const iteration_report& r, std::int64_t consumed, std::int64_t skipped, double lm_loss);
  void interval_line(const iteration_report& r, std::int64_t consumed, std::int64_t skipped, record_time at);

  config::megatron_args args_;
  std::FILE* out_;
  int world_size_;
  std::int64_t padded_vocab_;
  std::unique_ptr<tensorboard_writer> tb_;
  log_interval_state state_;
};

}  // namespace mactor::training
