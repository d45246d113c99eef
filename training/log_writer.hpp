// Megatron's training output on the printing rank: the per-interval training line, the
// validation blocks, print_datetime lines and the TensorBoard scalars, from merged reports.
// The logger actor owns one; a swapped-in logger takes over the interval state with state().
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "config/megatron_args.hpp"
#include "model/training_log.hpp"
#include "training/reports.hpp"
#include "training/tensorboard_writer.hpp"

namespace mactor::training {

/// What a logger carries from one log line to the next (handed over on a swap).
struct log_interval_state {
  model::training_log_accumulator accumulator;
  std::chrono::steady_clock::time_point interval_start = std::chrono::steady_clock::now();
};

class log_writer {
 public:
  /// `args` may differ from the job's in the logging flags only (a swap); `out` may be null.
  log_writer(const config::megatron_args& args, std::FILE* out, int world_size, std::int64_t padded_vocab_size);
  ~log_writer();

  void print(const std::string& line);
  /// Megatron's print_datetime: "[what] datetime: YYYY-MM-DD HH:MM:SS ".
  void print_datetime(const std::string& what);
  /// The args as TensorBoard text (write_args_to_tensorboard), once at the start of a job.
  void write_args();
  /// One finished iteration: the merged report (loss from the last stage, norms and rates from
  /// any rank) and the consumed samples after it. Prints the line every --log-interval.
  void iteration(const iteration_report& r, std::int64_t consumed_samples);
  /// Megatron's evaluate_and_print_results block (and its TensorBoard scalars).
  void validation(const std::string& prefix, double loss, std::int64_t iteration, std::int64_t consumed_samples);
  /// Leaves `seconds` out of the current interval's elapsed time (Megatron stops its
  /// interval-time timer while it evaluates or saves a checkpoint).
  void exclude_time(double seconds) {
    state_.interval_start += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  }
  /// Megatron writes no TensorBoard values when only evaluating (--skip-train).
  void drop_tensorboard() { tb_.reset(); }
  void flush();

  log_interval_state& state() { return state_; }
  const config::megatron_args& args() const { return args_; }

 private:
  config::megatron_args args_;
  std::FILE* out_;
  int world_size_;
  std::int64_t padded_vocab_;
  std::unique_ptr<tensorboard_writer> tb_;
  log_interval_state state_;
};

}  // namespace mactor::training
