// The coordinator (rank 0): runs the iteration loop (start on every replica, merge, log,
// evaluate, decide to go on or stop) and turns any rank's failure or disappearance into one job
// error sent to every rank. How it meets the ranks and starts training is coordinator_startup.cpp.
#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>

#include "actors/coordinator_state.hpp"
#include "actors/inspect.hpp"
#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "config/python_text.hpp"
#include "training/flops.hpp"

namespace mactor::actors::coordination {

void log(coordinator_actor* self, std::string text, bool datetime) {
  send_logger(self, log_line{std::move(text), datetime, {}});
}

// The logger's handled count, as the logger (or the one swapped in) publishes it.
std::int64_t logger_handled() { return counters_of("logger").handled.load(std::memory_order_relaxed); }

// An iteration's record, unless the logger already has MACTOR_LOGGER_QUEUE messages waiting.
// An iteration left out is left out of the next line's elapsed time too (its average covers the
// iterations it counts).
void log_iteration_record(coordinator_actor* self, log_iteration record) {
  auto& s = self->state;
  std::optional<std::string> started;
  if (!s.to_logger.admit(record.report.iteration, logger_handled(), &started)) {
    if (started) {
      std::fprintf(stderr, "%s\n", started->c_str());
      std::fflush(stderr);
    }
    s.excluded_seconds += std::chrono::duration<double>(s.iteration_end.value_or(s.iteration_start) - s.iteration_start).count();
    return;
  }
  if (auto notice = s.to_logger.take_notice()) log(self, *notice);
  record.excluded_seconds = std::exchange(s.excluded_seconds, 0.0);
  send_logger(self, std::move(record));
}

// Ends the job: every rank's agent learns the outcome; stages, replicas and observers quit.
void finish(coordinator_actor* self, job_outcome outcome) {
  auto& s = self->state;
  if (s.finished) return;
  if (outcome.exit_code == 0 && (s.saving || s.queued_save)) {
    s.finish_when_saved = std::move(outcome);  // the job ends once its checkpoints are durable
    return;
  }
  s.finished = true;
  if (s.inspect) s.inspect->job_ended();  // removes the token file before this process may end
  const bool ok = outcome.exit_code == 0;
  if (ok) stop_fault_tolerance(self);
  const abort_job abort{outcome.exit_code == 0 ? 0 : -1, outcome.exit_code, outcome.error, outcome.lost_peer};
  s.control->finish(std::move(outcome));  // before any agent's stop, so rank 0 keeps its result
  if (ok) {
    broadcast(self, s.stages, stop_message{});
    broadcast(self, s.replicas, stop_message{});
    broadcast(self, s.agents, stop_message{});
  } else {
    broadcast(self, s.agents, abort);
  }
  if (auto notice = s.to_logger.take_notice()) log(self, *notice);
  self->send(s.logger, stop_message{});
  self->send(s.evaluator, stop_message{});
  self->quit();
}

void fail(coordinator_actor* self, int exit_code, std::string message, bool lost_peer) {
  job_outcome o;
  o.exit_code = exit_code;
  o.error = std::move(message);
  o.lost_peer = lost_peer;
  finish(self, std::move(o));
}

void finish_ok(coordinator_actor* self) {
  job_outcome ok;
  ok.result = self->state.result;
  finish(self, std::move(ok));
}

std::string iteration_field(std::int64_t iteration) {
  char text[32];
  std::snprintf(text, sizeof text, "%7lld", static_cast<long long>(iteration));
  return text;
}

// The layout Megatron names after a checkpoint's path: " [ t 1/TP, p 1/PP ]".
std::string layout_field(const comm::process_groups& g) {
  return " [ t 1/" + std::to_string(g.tp()) + ", p 1/" + std::to_string(g.pp()) + " ]";
}

// Megatron's checkpoint_and_decide_exit, then the next iteration or the end of training.
void after_iteration(coordinator_actor* self) {
  auto& s = self->state;
  const auto& a = s.args;
  const bool saving = a.checkpointing.save.has_value();
  const bool interval_save = interval_save_at(a, s.iteration);
  const bool non_persistent_save = non_persistent_save_at(a, s.iteration);
  // Megatron's saved_checkpoint: either save spares the exit's own save.
  auto decide = [self, saving, saved = interval_save || non_persistent_save] {
    auto& s = self->state;
    const auto& a = s.args;
    std::optional<std::string> exit_line;
    if (s.exit_signal) exit_line = "exiting program after receiving SIGTERM.";
    if (!exit_line && a.training.exit_duration_in_mins.value_or(0) != 0) {  // Python truthiness: 0 means off
      const double minutes = std::chrono::duration<double>(clock_type::now() - s.train_start).count() / 60.0;
      if (minutes > static_cast<double>(*a.training.exit_duration_in_mins))
        exit_line = "exiting program after " + config::python_float_repr(minutes) + " minutes";
    }
    if (!exit_line && a.training.exit_interval.value_or(0) != 0 && s.iteration % *a.training.exit_interval == 0)
      exit_line = "exiting program at iteration " + std::to_string(s.iteration);
    if (exit_line) {
      // Megatron saves (unless this iteration just did), prints, and exits: no final evaluation.
      auto leave = [self, line = *exit_line] {
        log(self, line, true);
        finish_ok(self);
      };
      if (saving && !saved)
        save_then(self, leave);
      else
        leave();
      return;
    }
    if (s.iteration < *a.training.train_iters)
      start_iteration(self);
    else
      finish_training(self);
  };
  if (interval_save || non_persistent_save)
    save_then(self, decide, non_persistent_save);
  else
    decide();
}

void start_iteration(coordinator_actor* self) {
  auto& s = self->state;
  if (!skip_listed_iterations(self)) {
    s.result.consumed_train_samples = s.consumed;
    finish_training(self);
    return;
  }
  announce_batch_size(self);
  const auto now = clock_type::now();
  if (s.iteration_end) {  // evaluations and saves since the last iteration are not training time
    s.excluded_seconds += std::chrono::duration<double>(now - *s.iteration_end).count();
    s.iteration_end.reset();
  }
  s.iteration_start = now;
  ++s.iteration;
  if (s.ft) s.ft->training_step_start(now);
  s.reports_pending = s.replicas.size();
  if (s.inspect) s.inspect->coordinator_activity("running iteration " + std::to_string(s.iteration), s.iteration - 1);
  broadcast(self, s.replicas, run_iteration{s.iteration, s.consumed});
}

void finish_training(coordinator_actor* self) {
  auto& s = self->state;
  if (!s.args.validation.skip_train) log(self, "after training is done", true);
  if (s.args.logging.log_energy && !s.energy_missing && !s.args.validation.skip_train)
    log(self, "Total training energy (GPU): " + config::python_float_repr(s.total_energy / 1e6) + " MJ");
  // Megatron's pretrain saves the last iteration unless the interval just did, then evaluates.
  if (!s.args.validation.skip_train && s.args.checkpointing.save && s.iteration != 0 && !interval_save_at(s.args, s.iteration)) {
    save_then(self, [self] { plan_evaluations(self, /*final=*/true); });
    return;
  }
  plan_evaluations(self, /*final=*/true);
}

// A stage's share of an iteration; the last one completes it: the log record, then evaluations.
void on_iteration_report(coordinator_actor* self, const training::iteration_report& r) {
  auto& s = self->state;
  s.rerun_exit_code = std::max(s.rerun_exit_code, r.rerun_exit_code);
  s.rerun_checkpoint = s.rerun_checkpoint || r.rerun_checkpoint;
  if (s.rerun_exit_code != 0) {
    if (--s.reports_pending == 0) end_on_result_validation(self);
    return;
  }
  s.timings.insert(s.timings.end(), r.timings.begin(), r.timings.end());
  s.memory.insert(s.memory.end(), r.memory.begin(), r.memory.end());
  s.straggler_samples.insert(s.straggler_samples.end(), r.straggler.begin(), r.straggler.end());
  s.exit_signal = s.exit_signal || r.exit_signal;
  s.iteration_energy += r.energy_joules;
  s.energy_missing = s.energy_missing || r.energy_missing;
  if (r.has_loss) s.merged = r;  // every replica's last stage holds the same total
  if (--s.reports_pending > 0) return;
  if (s.ft) s.ft->training_step_end(clock_type::now());
  s.merged.energy_joules = std::exchange(s.iteration_energy, 0.0);
  s.merged.energy_missing = s.energy_missing;
  s.total_energy += s.merged.energy_joules;
  s.merged.timings = std::exchange(s.timings, {});
  s.merged.memory = std::exchange(s.memory, {});
  s.consumed += s.merged.global_batch_size;
  const double flops = training::num_floating_point_operations(s.args, s.vocab.padded, s.merged.global_batch_size);
  s.floating_point_operations += flops;
  s.iteration_end = clock_type::now();
  const auto& m = s.merged;
  s.result.lm_loss.push_back(m.num_tokens > 0 ? m.loss_sum / m.num_tokens : 0.0);
  s.result.grad_norm.push_back(m.has_grad_norm ? m.grad_norm : 0.0);
  s.result.learning_rate.push_back(m.learning_rate);
  s.result.loss_scale.push_back(m.loss_scale);
  s.result.skipped.push_back(!m.update_successful);
  s.result.consumed_train_samples = s.consumed;
  log_iteration_record(self, log_iteration{m, s.consumed, s.skipped, {}, 0.0});
  if (s.straggler)  // --log-straggler: Megatron reports after the iteration's log line
    for (auto& line : s.straggler->iteration(m.iteration, std::exchange(s.straggler_samples, {}), flops))
      log(self, std::move(line));
  plan_evaluations(self, /*final=*/false);
}

caf::behavior coordinator(coordinator_actor* self, config::megatron_args args, comm::process_groups groups,
                          training::vocabulary vocab, caf::actor logger, caf::actor evaluator,
                          std::shared_ptr<job_control> control) {
  start_coordinator(self, std::move(args), std::move(groups), vocab, std::move(logger), std::move(evaluator),
                    std::move(control));
  return {
      [=](hello_message& h) { on_hello(self, h); },
      [=](stage_ready& r) { on_stage_ready(self, r); },
      [=](training::iteration_report& r) { on_iteration_report(self, r); },
      [=](training::evaluation_report& r) { on_evaluation_report(self, r); },
      [=](checkpoint_captured& c) { on_checkpoint_captured(self, c); },
      [=](checkpoint_saved& c) { on_checkpoint_saved(self, c); },
      [=](abort_job& a) { fail(self, a.exit_code, a.message, a.lost_peer); },
      // The inspector (inspection.hpp): stage reports, the periodic refresh, hot swap.
      [=](stage_status& st) -> std::int64_t {
        return self->state.inspect ? self->state.inspect->stage_reported(st) : 0;
      },
      [=](inspect_tick_atom) {
        auto& s = self->state;
        if (s.finished || (!s.inspect && !s.ft)) return;
        if (s.inspect)
          if (auto hang = s.inspect->tick(static_cast<std::int64_t>(self->mailbox().size())))
            return fail(self, hang_exit_code, *hang);  // a restart supervisor would act here
        if (auto hang = fault_tolerance_hang(self)) return fail(self, hang_exit_code, *hang);
        self->delayed_send(self, status_interval, inspect_tick_atom::value);
      },
      [=](swap_request& r) {
        auto promise = self->make_response_promise<swap_answer>();
        if (!self->state.inspect)
          promise.deliver(swap_answer{false, "the inspector is off (MACTOR_INSPECT=off)"});
        else
          self->state.inspect->swap(self, r, self->state.logger, self->state.evaluator, promise);
        return promise;
      },
  };
}

}  // namespace mactor::actors::coordination

namespace mactor::actors {

caf::actor spawn_coordinator(caf::actor_system& sys, const config::megatron_args& args, const comm::process_groups& groups,
                             training::vocabulary vocab, caf::actor logger, caf::actor evaluator,
                             std::shared_ptr<job_control> control) {
  return sys.spawn(coordination::coordinator, args, groups, vocab, std::move(logger), std::move(evaluator), std::move(control));
}

}  // namespace mactor::actors
