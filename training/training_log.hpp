// Megatron's training log text (core_v0.15.0 training.py / timers.py), byte for byte: the
// per-interval line and its accumulation rules, the validation block and the timers block.
// Pure: everything returns strings; printing is the caller's.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/python_text.hpp"

namespace mactor::training {

/// Python's format(v, '.{precision}E'): "1.500000E-04", "INF", "NAN".
std::string python_format_exp(double v, int precision);
/// Python's format(v, '.{precision}f'): "1234.6", "inf", "nan".
std::string python_format_fixed(double v, int precision);
/// Python's format(v, '{width}d') for an int: right-aligned, space padded.
std::string python_format_int(std::int64_t v, int width);
/// Python's str(float): shortest round-trip digits, "123.0", "1e+16", "1e-05" (config/'s, which the
/// arguments block also uses).
using config::python_float_repr;
/// Local time as strftime("%Y-%m-%d %H:%M:%S").
std::string log_timestamp(std::chrono::system_clock::time_point when);

/// (key, value) pairs in the order the loss function reports them, e.g. {"lm loss", 7.1f}.
using loss_entries = std::vector<std::pair<std::string, float>>;

/// The per-interval state of training_log: advanced / skipped / nan iteration counters and
/// fp32 loss sums by key, keys kept in first-insertion order.
class training_log_accumulator {
 public:
  /// One iteration. Losses are summed only when it was not skipped; a skipped iteration with
  /// any inf or nan loss counts as a nan iteration.
  void add_iteration(std::span<const std::pair<std::string, float>> losses, bool skipped);
  /// A value Megatron's trackers add to total_loss_dict after the loss loop, skipped iteration
  /// or not (track_mtp_metrics' "mtp_<k> loss").
  void add_tracked(const std::string& key, float value);

  std::int64_t advanced_iterations() const { return advanced_; }
  std::int64_t skipped_iterations() const { return skipped_; }
  std::int64_t nan_iterations() const { return nan_; }
  /// sum / max(1, advanced) per key in first-insertion order (zeros included).
  std::vector<std::pair<std::string, double>> loss_averages() const;
  /// After printing: sums to zero (keys kept, so their order holds), counters to zero.
  void reset();

 private:
  loss_entries sums_;
  std::int64_t advanced_ = 0;
  std::int64_t skipped_ = 0;
  std::int64_t nan_ = 0;
};

/// The values of one log line, already computed. Presence of optional fields follows
/// log_format.md: an unset optional is not printed.
struct training_log_line {
  std::string timestamp;  ///< "YYYY-MM-DD HH:MM:SS"
  std::int64_t iteration = 0;
  std::int64_t train_iters = 0;
  std::int64_t consumed_train_samples = 0;
  std::int64_t skipped_train_samples = 0;  ///< printed only when > 0
  double elapsed_time_per_iteration = 0.0;  ///< seconds
  std::optional<double> throughput;         ///< TFLOP/s/GPU (--log-throughput)
  std::optional<double> energy_per_gpu;     ///< J/iter/GPU (--log-energy, with power)
  std::optional<double> power_per_gpu;      ///< W/GPU
  double learning_rate = 0.0;
  std::optional<double> decoupled_learning_rate;
  std::int64_t global_batch_size = 0;
  std::vector<std::pair<std::string, double>> loss_averages;  ///< each printed when > 0
  double loss_scale = 1.0;
  std::optional<double> grad_norm;
  std::optional<double> num_zeros_in_grad;
  std::optional<double> params_norm;
  std::int64_t skipped_iterations = 0;
  std::int64_t nan_iterations = 0;
};

/// The line exactly as Megatron prints it (no newline).
std::string format_training_log_line(const training_log_line& line);

/// What training_log receives at a log iteration, before its arithmetic.
struct training_log_inputs {
  std::string timestamp;
  std::int64_t iteration = 0;
  std::int64_t train_iters = 0;
  std::int64_t consumed_train_samples = 0;
  std::int64_t skipped_train_samples = 0;
  double interval_seconds = 0.0;  ///< the interval-time timer since the last log
  int world_size = 1;
  std::optional<double> flops_per_iteration;  ///< set with --log-throughput
  std::optional<double> energy_joules;        ///< energy monitor lap, set with --log-energy
  double learning_rate = 0.0;                 ///< max over the model-parallel group
  std::optional<double> decoupled_learning_rate;  ///< set on first/last stage with --decoupled-lr
  std::int64_t global_batch_size = 0;  ///< micro batch * dp * current microbatches
  double loss_scale = 1.0;
  std::optional<double> grad_norm;          ///< this iteration's, before clipping
  std::optional<double> num_zeros_in_grad;  ///< with --log-num-zeros-in-grad
  std::optional<double> params_norm;        ///< with --log-params-norm
};

/// Megatron's arithmetic: time per iteration = interval / (advanced + skipped); throughput =
/// flops / (time * 1e12 * world); energy = joules / iterations / world, power = energy / time;
/// the learning rate, grad norm and zero count pass through fp32 (Megatron's max-reduction).
training_log_line make_training_log_line(const training_log_inputs& in,
                                         const training_log_accumulator& acc);

/// make_training_log_line, format it, and reset the accumulator: one log iteration.
std::string training_log_interval(const training_log_inputs& in, training_log_accumulator& acc);

/// Validation sums per key: Megatron's evaluate() keeps fp32 (numerator, denominator) pairs.
class validation_loss_accumulator {
 public:
  void add(const std::string& key, float numerator, float denominator);
  /// numerator / denominator per key in first-insertion order.
  loss_entries values() const;

 private:
  std::vector<std::pair<std::string, std::pair<float, float>>> sums_;
};

/// The three printed lines (dashes, text, dashes) joined by '\n'. prefix is e.g.
/// "iteration 100" or "iteration 100 on test set"; set_index gives "validation-{i}" with
/// multiple validation sets.
std::string format_validation_block(std::string_view prefix,
                                    std::span<const std::pair<std::string, float>> values,
                                    std::optional<int> set_index = {});

enum class timing_log_option { max, minmax, all };
/// --timing-log-option: max, minmax, all.
std::optional<timing_log_option> parse_timing_log_option(std::string_view text);

/// One timer's elapsed seconds on every rank (index = global rank; 0 where not timed).
struct timer_reading {
  std::string name;
  std::vector<double> seconds_by_rank;
};

/// The timers block (lines joined by '\n'), values in ms divided by normalizer (the log
/// interval); nullopt when no timer has a reading, as Megatron then prints nothing.
std::optional<std::string> format_timers_block(std::span<const timer_reading> timers,
                                               timing_log_option option, double normalizer);

/// The timer names training_log asks for, in its order.
std::span<const std::string_view> megatron_training_timer_names();

}  // namespace mactor::training
