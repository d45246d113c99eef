// Megatron-Core's rerun state machine, decision by decision (rerun_state_machine.py of
// core_v0.15.0), with the world-wide flags summed by the caller's agreement function.
#include "training/result_validation.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include "config/python_text.hpp"

namespace mactor::training {
namespace {

constexpr double comparison_match = 0.0;
constexpr double comparison_mismatch = INFINITY;

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// Python's str(datetime.datetime.now()): "2026-12-04 13:49:10.764821".
std::string now_text() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm local{};
  localtime_r(&t, &local);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02d %02d:%02d:%02d.%06lld", local.tm_year + 1900, local.tm_mon + 1,
                local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec, static_cast<long long>(micros));
  return text;
}

// f"{tensor}" of Megatron's 0-dim fp32 loss: Python's repr of the value as a float32.
std::string result_text(double result) {
  return config::python_float_repr(static_cast<double>(static_cast<float>(result)));
}

const char* diagnostic_name(rerun_diagnostic d) {
  switch (d) {
    case rerun_diagnostic::correct_result: return "Expected result";
    case rerun_diagnostic::transient_error: return "Transient error";
    case rerun_diagnostic::persistent_error: return "Persistent error";
  }
  return "";
}

}  // namespace

double compare_results(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return comparison_match;
  if (std::isnan(a) || std::isnan(b) || std::isinf(a) != std::isinf(b)) return comparison_mismatch;
  return std::fabs((a - b) / (a + b) * 2);
}

result_validation::result_validation(rerun_options options, rerun_log sink)
    : options_(std::move(options)), log_(std::move(sink)), random_(options_.seed) {
  if (options_.tracker_filename) {
    std::ofstream probe(*options_.tracker_filename, std::ios::app);
    if (!probe)
      throw std::runtime_error("RerunStateMachine result validation log cannot be appended to! (--result-rejected-tracker-filename " +
                               *options_.tracker_filename + ")");
  }
  if (options_.logs_for_job)
    log("WARNING", std::string("RerunStateMachine initialized in mode RerunMode.") +
                       (options_.mode == rerun_mode::disabled ? "DISABLED" : "VALIDATE_RESULTS"));
}

void result_validation::log(const std::string& level, const std::string& text) const {
  if (log_) log_(level, text);
}

bool result_validation::should_run_forward_backward(const rerun_agreement& agree) {
  validation_counts_.clear();
  switch (state_) {
    case rerun_state::not_running_yet:
      ++current_iteration_;
      state_ = rerun_state::initial_run;
      rerun_requested_ = checkpoint_requested_ = restart_again_requested_ = continue_requested_ = false;
      return true;
    case rerun_state::initial_run:
      if (options_.mode == rerun_mode::disabled || agree(rerun_requested_ ? 1 : 0) == 0) {
        state_ = rerun_state::not_running_yet;
        return false;
      }
      if (options_.logs_for_job) log("WARNING", "Need to rerun step to check reproducibility of initial result");
      state_ = rerun_state::rerunning_in_place;
      return true;
    case rerun_state::rerunning_in_place:
      if (agree(checkpoint_requested_ ? 1 : 0) > 0) state_ = rerun_state::will_rerun_from_checkpoint;
      return false;
    case rerun_state::will_rerun_from_checkpoint:
      state_ = rerun_state::rerunning_from_checkpoint;
      return true;
    case rerun_state::rerunning_from_checkpoint:
      if (agree(restart_again_requested_ ? 1 : 0) > 0) {
        if (options_.logs_for_job)
          log("WARNING", "Need to restart job from the same checkpoint because it was scheduled on the same node/GPU");
        state_ = rerun_state::rerunning_again_from_checkpoint;
      } else if (agree(continue_requested_ ? 1 : 0) > 0) {
        if (options_.logs_for_job) log("WARNING", "Continuing normal execution because failed validation was not fatal");
        state_ = rerun_state::not_running_yet;
      }
      return false;
    case rerun_state::rerunning_again_from_checkpoint: break;
  }
  throw std::logic_error("result validation: should_run_forward_backward in an unexpected state");
}

result_validation::exit_decision result_validation::should_checkpoint_and_exit() {
  first_iteration_complete_ = true;
  if (options_.mode == rerun_mode::disabled) return {};
  const bool say = options_.logs_for_job;
  switch (state_) {
    case rerun_state::rerunning_in_place:
      if (say) log("WARNING", "Exiting now. A checkpoint at the last iteration is being saved if further examination is needed");
      return {true, true, exit_code_failed_on_result_validation};
    case rerun_state::will_rerun_from_checkpoint:
      if (say)
        log("WARNING", "Saving a checkpoint and exiting now. Please resume the job from the checkpoint to rerun the last "
                       "iteration and establish a diagnostic");
      return {true, true, exit_code_resume_to_disambiguate};
    case rerun_state::rerunning_from_checkpoint:
      if (say) log("WARNING", "Exiting now. A checkpoint at the last iteration already exists if further examination is needed");
      return {false, true, exit_code_failed_on_result_validation};
    case rerun_state::rerunning_again_from_checkpoint:
      if (say)
        log("WARNING", "Exiting now. Please resume the job from the same checkpoint to rerun the last iteration and establish "
                       "a diagnostic");
      return {false, true, exit_code_resume_to_disambiguate};
    default: return {};
  }
}

result_validation::call result_validation::next_call(const std::string& message) {
  return call{message, ++validation_counts_[message]};
}

void result_validation::validate_result(double result, const std::function<bool(double)>& rejected,
                                        const std::string& message, double tolerance, bool fatal) {
  const std::string where = "Rank " + std::to_string(options_.rank) + ", node " + host_name() + ", device " +
                            std::to_string(options_.device);
  if (options_.mode == rerun_mode::disabled) {
    if (rejected(result)) {
      log_to_tracker("RerunValidationStatus.RERUN_DISABLED", result, message);
      throw std::runtime_error(where + ", iteration " + std::to_string(current_iteration_) + ": Unexpected result " +
                               result_text(result) + " (message='" + message + "')");
    }
    return;
  }
  if (state_ == rerun_state::not_running_yet)
    throw std::logic_error("validate_result should not be called outside of the forward-backward pass");
  const call this_call = next_call(message);
  if (!logged_enabled_) {
    logged_enabled_ = true;
    if (options_.logs_for_job) log("WARNING", "Result validation enabled");
  }
  if (state_ == rerun_state::initial_run && !rerun_requested_) {
    // Not on the job's first iteration: no checkpoint can be taken before a first optimizer step.
    if (!first_iteration_complete_) return;
    if (maybe_inject() || rejected(result)) {
      failed_call_ = this_call;
      initial_result_ = result;
      rerun_requested_ = true;
      log_to_tracker("RerunValidationStatus.INITIAL_RUN", result, message);
      log("ERROR", "Unexpected result " + result_text(result) + " on rank " + std::to_string(options_.rank) +
                       " at iteration #" + std::to_string(current_iteration_) + " invokation #" +
                       std::to_string(this_call.sequence) + " (message='" + message + "')");
    }
    return;
  }
  const bool rerun = state_ == rerun_state::rerunning_in_place || state_ == rerun_state::rerunning_from_checkpoint;
  if (!rerun || !failed_call_ || !(this_call == *failed_call_)) return;
  const double comparison = maybe_miscompare(initial_result_, result);
  const std::string pair = result_text(result) + (comparison > tolerance ? " != " : " = ") + result_text(initial_result_);
  if (state_ == rerun_state::rerunning_in_place) {
    if (comparison > tolerance) {
      log("WARNING", "First rerun: unexpected result is not reproducible within the tolerance (" + pair + ")");
      log_to_tracker("RerunValidationStatus.FIRST_RERUN_NOT_REPRODUCIBLE", result, message);
      log("ERROR", where + ": Possible transient error!!");
    } else {
      checkpoint_requested_ = true;
      log_to_tracker("RerunValidationStatus.FIRST_RERUN_REPRODUCIBLE", result, message);
      log("WARNING", "First rerun: unexpected result is reproducible within the tolerance (" + pair +
                         "). Need to rerun on a different GPU to verify correctness");
    }
    return;
  }
  // The second rerun (from the checkpoint, on another device).
  if (comparison > tolerance) {
    log_to_tracker("RerunValidationStatus.SECOND_RERUN_NOT_REPRODUCIBLE", result, message);
    log("WARNING", "Second rerun: unexpected result is not reproducible on a different GPU, therefore was likely "
                   "incorrect (" + pair + ")");
    log("ERROR", where + ": Possible persistent error!!");
  } else {
    log_to_tracker("RerunValidationStatus.SECOND_RERUN_REPRODUCIBLE", result, message);
    log("WARNING", "Second rerun: unexpected result is reproducible on a different GPU, therefore it was likely correct (" +
                       pair + ")");
    log("ERROR", where + ": Correct result (but possible Application error) (" + message + ")!");
    if (!fatal) continue_requested_ = true;
  }
}

bool result_validation::is_unexpectedly_large(double value, double threshold, const std::string& context,
                                              int num_samples) {
  value = std::fabs(value);
  if (std::isnan(value) || std::isinf(value)) return false;
  int& count = large_value_counts_[context];
  if (count < num_samples) {
    ++count;
    double& max = max_values_[context];
    max = std::max(max, value);
    if (count == num_samples) log("WARNING", "Max value for " + context + ": " + config::python_float_repr(max));
    return false;
  }
  return value >= max_values_[context] * threshold;
}

// Megatron's RerunErrorInjector.maybe_inject: at most one injection per iteration; a draw in
// [0, rate) shifted by the rank hits zero about once in `rate` validations.
bool result_validation::maybe_inject() {
  if (options_.error_injection_rate <= 0 || injected_) return false;
  std::uniform_int_distribution<std::int64_t> draw(0, options_.error_injection_rate - 1);
  if ((draw(random_) + options_.rank) % options_.error_injection_rate != 0) return false;
  injected_ = options_.error_injection_type;
  log("WARNING", std::string("Injecting error type ") + diagnostic_name(*injected_));
  return true;
}

// Megatron's maybe_miscompare: an injected error decides the comparison of each rerun.
double result_validation::maybe_miscompare(double initial, double result) {
  if (!injected_) return compare_results(initial, result);
  const rerun_diagnostic injected = *injected_;
  if (state_ == rerun_state::rerunning_in_place) {
    if (injected != rerun_diagnostic::transient_error) return comparison_match;
    injected_.reset();
    return comparison_mismatch;
  }
  if (injected == rerun_diagnostic::transient_error)
    throw std::logic_error("result validation: an injected transient error reached the rerun from the checkpoint");
  injected_.reset();
  return injected == rerun_diagnostic::persistent_error ? comparison_mismatch : comparison_match;
}

// One line of --result-rejected-tracker-filename, in Megatron's format (its parser reads it back).
void result_validation::log_to_tracker(const char* status, double result, const std::string& message) const {
  if (!options_.tracker_filename) return;
  std::ofstream out(*options_.tracker_filename, std::ios::app);
  const char* job = std::getenv("SLURM_JOBID");
  out << "ts=" << now_text() << " node=" << host_name() << " device=" << options_.device
      << " jobID=" << (job ? job : "N/A") << " rank=" << options_.rank << " iteration=" << current_iteration_
      << " status=" << status << " result=" << result_text(result) << " message='" << message << "'\n";
  if (!out) log("ERROR", "Could not log validation error! (" + *options_.tracker_filename + ")");
}

}  // namespace mactor::training
