// Megatron-Core's rerun state machine (--rerun-mode): the results of an iteration (the local
// loss of each micro-batch) are validated; a rejected one (NaN, Inf, a spiky loss, or an injected
// error) makes every rank run the iteration again on the same micro-batches before the optimizer
// step, and the comparison of the two runs decides how the job ends: a result the rerun does not
// reproduce is a transient fault (checkpoint, exit 17), a reproduced one must be rerun elsewhere
// (checkpoint, exit 16). No CAF, no engine: the rank worker feeds it and asks it what to do.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>

namespace mactor::training {

/// Megatron's exit codes (rerun_state_machine.py).
inline constexpr int exit_code_resume_to_disambiguate = 16;
inline constexpr int exit_code_failed_on_result_validation = 17;
/// pretrain_gpt.py's SPIKY_LOSS_FACTOR: a loss this many times the largest of the first 100 is spiky.
inline constexpr double spiky_loss_factor = 10.0;
/// Megatron-Core's check_grads threshold: a bucket's local grad norm this many times the largest
/// of the first 100 is unexpectedly large.
inline constexpr double large_grads_factor = 10.0;

enum class rerun_mode { disabled, validate_results };
enum class rerun_state {
  not_running_yet,
  initial_run,
  rerunning_in_place,
  will_rerun_from_checkpoint,
  rerunning_from_checkpoint,
  rerunning_again_from_checkpoint,
};
enum class rerun_diagnostic { correct_result, transient_error, persistent_error };

struct rerun_options {
  rerun_mode mode = rerun_mode::validate_results;
  std::int64_t error_injection_rate = 0;  ///< 0: none; N: about one validation in N is rejected
  rerun_diagnostic error_injection_type = rerun_diagnostic::transient_error;
  std::optional<std::string> tracker_filename;  ///< --result-rejected-tracker-filename
  int rank = 0;                                 ///< global rank (messages, tracker, injection)
  int device = 0;                               ///< the rank's local device index
  bool logs_for_job = false;                    ///< prints the lines Megatron prints on rank 0 only
  std::uint64_t seed = 1234;                    ///< the injector's random stream
};

/// One line of Megatron's log ("LEVEL:megatron.core.rerun_state_machine:text").
using rerun_log = std::function<void(const std::string& level, const std::string& text)>;
/// Sums an int over every rank (the world-wide agreement).
using rerun_agreement = std::function<int(int)>;

class result_validation {
 public:
  explicit result_validation(rerun_options options, rerun_log sink = {});

  rerun_mode mode() const { return options_.mode; }
  rerun_state state() const { return state_; }
  std::int64_t current_iteration() const { return current_iteration_; }
  /// The iteration the job starts after (--load), as Megatron's train() overwrites it.
  void set_current_iteration(std::int64_t iteration) { current_iteration_ = iteration; }

  /// Megatron's should_run_forward_backward: called before the first run of each iteration and
  /// after every run; true: (re)run the forward-backward now on the same micro-batches.
  bool should_run_forward_backward(const rerun_agreement& agree);
  /// Megatron's validate_result; `rejected` says whether a result fails (torch.isnan, ...).
  void validate_result(double result, const std::function<bool(double)>& rejected, const std::string& message,
                       double tolerance, bool fatal);
  /// Megatron's is_unexpectedly_large: the largest |value| of the first `num_samples` is the
  /// reference; later values at or above `threshold` times it are rejected (NaN/Inf never).
  bool is_unexpectedly_large(double value, double threshold, const std::string& context, int num_samples = 100);

  struct exit_decision {
    bool checkpoint = false, exit = false;
    int exit_code = 0;
  };
  /// Megatron's should_checkpoint_and_exit, after the last run of an iteration.
  exit_decision should_checkpoint_and_exit();

 private:
  struct call {
    std::string message;
    int sequence = 0;
    bool operator==(const call&) const = default;
  };
  call next_call(const std::string& message);
  bool maybe_inject();
  double maybe_miscompare(double initial, double result);
  void log_to_tracker(const char* status, double result, const std::string& message) const;
  void log(const std::string& level, const std::string& text) const;

  rerun_options options_;
  rerun_log log_;
  rerun_state state_ = rerun_state::not_running_yet;
  std::int64_t current_iteration_ = 0;
  bool first_iteration_complete_ = false;
  bool rerun_requested_ = false, checkpoint_requested_ = false, restart_again_requested_ = false,
       continue_requested_ = false;
  bool logged_enabled_ = false;
  std::map<std::string, int> validation_counts_;
  std::optional<call> failed_call_;
  double initial_result_ = 0;
  std::map<std::string, int> large_value_counts_;
  std::map<std::string, double> max_values_;
  std::mt19937_64 random_;
  std::optional<rerun_diagnostic> injected_;
};

/// Megatron's _compare_floats: 0 for equal (or both NaN), inf for NaN/Inf against a number,
/// else the relative difference |a - b| / ((a + b) / 2).
double compare_results(double a, double b);

}  // namespace mactor::training
