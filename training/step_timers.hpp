// One rank's share of Megatron's training timers (megatron/core/timers.py, --timing-log-level):
// the seconds each timed part of a training step ran, summed until the log writer takes them.
// Only the parts mactor has are timed; see step_timer for which, at which level.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace mactor::training {

class trace_recorder;

/// The timers mactor keeps, each at the log level Megatron-LM core_v0.15.0 gives it. Megatron's
/// other training timers time things mactor does not do (blocking combined p2p calls,
/// 'batch-generator' and 'layernorm-grads-all-reduce', which Megatron itself never starts). A
/// timer that never ran prints nothing, as in Megatron (its zero is filtered out).
enum class step_timer {
  forward_backward,            ///< 1: the schedule and the gradient finalization after it
  forward_compute,             ///< 2: every forward of a micro-batch
  backward_compute,            ///< 2: every backward of a micro-batch
  forward_recv,                ///< 2: waiting for an activation from the previous stage
  backward_recv,               ///< 2: waiting for a gradient from the next stage
  embedding_grads_all_reduce,  ///< 1: the tied-embedding gradient sum (first and last stage)
  all_grads_sync,              ///< 1: the data-parallel all-reduce or reduce-scatter
  params_all_gather,           ///< 1: the distributed optimizer's parameter all-gather
  optimizer_copy_to_main_grad,           ///< 1: model gradients into the optimizer's main grads
  optimizer_unscale_and_check_inf,       ///< 1: the loss scaler's unscale and inf/NaN check
  optimizer_clip_main_grad,    ///< 1: grad norm and clipping
  optimizer_count_zeros,       ///< 1: --log-num-zeros-in-grad's count
  optimizer_inner_step,        ///< 1: the parameter update
  optimizer_copy_main_to_model_params,   ///< 1: main parameters into a 16-bit or sharded model
  optimizer,                   ///< 1: the whole optimizer step
};
inline constexpr std::size_t num_step_timers = 15;

/// Megatron's name of the timer ("forward-backward") and its log level.
std::string_view step_timer_name(step_timer t);
int step_timer_level(step_timer t);

class step_timers {
 public:
  using clock = std::chrono::steady_clock;

  /// Timers above `log_level` (--timing-log-level) are not kept, as Megatron's dummy timers.
  explicit step_timers(int log_level = 0) : log_level_(log_level) {}

  bool enabled(step_timer t) const { return step_timer_level(t) <= log_level_; }
  void add(step_timer t, double seconds) {
    if (enabled(t)) seconds_[static_cast<std::size_t>(t)] += seconds;
  }
  /// Adds the seconds since `since`, and (--profile) records them as a span named after the timer.
  void add(step_timer t, clock::time_point since);
  /// The trace that every timed span also goes to (null: none).
  void trace_into(trace_recorder* trace) { trace_ = trace; }

  /// Times a scope: the seconds from construction to destruction go to the timer.
  class [[nodiscard]] scope {
   public:
    scope(step_timers& timers, step_timer t) : timers_(timers), timer_(t), start_(clock::now()) {}
    ~scope() { timers_.add(timer_, start_); }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    step_timers& timers_;
    step_timer timer_;
    clock::time_point start_;
  };
  scope time(step_timer t) { return scope(*this, t); }

  /// The seconds summed since the last take, by step_timer (empty when the level keeps no
  /// timer), and zero again afterwards.
  std::vector<double> take();

 private:
  int log_level_;
  std::array<double, num_step_timers> seconds_{};
  trace_recorder* trace_ = nullptr;
};

}  // namespace mactor::training
