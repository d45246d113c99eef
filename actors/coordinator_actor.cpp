// The coordinator (rank 0): meets every rank's actors, hands out the config message, runs the
// iteration loop (start on every replica, merge, log, evaluate, decide to go on or stop), and
// turns any rank's failure or disappearance into one job error sent to every rank.
#include <caf/all.hpp>
#include <chrono>
#include <map>

#include "actors/config_message.hpp"
#include "actors/inspect.hpp"
#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "config/python_text.hpp"
#include "training/rank_worker.hpp"

namespace mactor::actors {
namespace {

using clock_type = std::chrono::steady_clock;

struct coordinator_state {
  config::megatron_args args;
  std::unique_ptr<comm::process_groups> groups;
  training::vocabulary vocab;
  caf::actor logger, evaluator;
  std::shared_ptr<job_control> control;
  std::vector<caf::actor> stages, agents, replicas;
  std::map<caf::actor_addr, int> rank_of;
  int hellos = 0, ready = 0;
  bool has_valid = true, has_test = true;
  std::int64_t iteration = 0, consumed = 0;
  std::size_t pending = 0;
  training::iteration_report merged;
  training::evaluation_report eval_merged;
  evaluation_plan plan;
  std::size_t plan_index = 0;
  bool final_phase = false, finished = false;
  training::training_result result;
  clock_type::time_point train_start;
  std::unique_ptr<job_inspection> inspect;  // the inspector's endpoint and stall report (inspection.hpp)
  static inline const char* name = "coordinator";
};

using coordinator_actor = caf::stateful_actor<coordinator_state>;

void log(coordinator_actor* self, std::string text, bool datetime = false) {
  self->send(self->state.logger, log_line{std::move(text), datetime});
}

void broadcast(coordinator_actor* self, const std::vector<caf::actor>& to, const auto& message) {
  for (const auto& a : to)
    if (a) self->send(a, message);
}

// Ends the job: every rank's agent learns the outcome; stages, replicas and observers quit.
void finish(coordinator_actor* self, job_outcome outcome) {
  auto& s = self->state;
  if (s.finished) return;
  s.finished = true;
  if (s.inspect) s.inspect->job_ended();  // removes the token file before this process may end
  const bool ok = outcome.exit_code == 0;
  const abort_job abort{outcome.exit_code == 0 ? 0 : -1, outcome.exit_code, outcome.error};
  s.control->finish(std::move(outcome));  // before any agent's stop, so rank 0 keeps its result
  if (ok) {
    broadcast(self, s.stages, stop_message{});
    broadcast(self, s.replicas, stop_message{});
    broadcast(self, s.agents, stop_message{});
  } else {
    broadcast(self, s.agents, abort);
  }
  self->send(s.logger, stop_message{});
  self->send(s.evaluator, stop_message{});
  self->quit();
}

void fail(coordinator_actor* self, int exit_code, std::string message) {
  job_outcome o;
  o.exit_code = exit_code;
  o.error = std::move(message);
  finish(self, std::move(o));
}

void start_iteration(coordinator_actor* self);
void finish_training(coordinator_actor* self);

// Runs the next split of the current evaluation plan, or goes on when the plan is done.
void next_evaluation(coordinator_actor* self) {
  auto& s = self->state;
  while (s.plan_index < s.plan.splits.size()) {
    const int split = s.plan.splits[s.plan_index];
    if ((split == 1 && s.has_valid) || (split == 2 && s.has_test)) {
      s.pending = s.replicas.size();
      if (s.inspect) s.inspect->coordinator_activity("evaluating split " + std::to_string(split) + " after iteration " +
                                                     std::to_string(s.iteration), s.iteration);
      broadcast(self, s.replicas, run_evaluation{split});
      return;
    }
    ++s.plan_index;
  }
  if (s.final_phase) {
    job_outcome ok;
    ok.result = s.result;
    finish(self, std::move(ok));
    return;
  }
  const auto& a = s.args;
  if (a.training.exit_duration_in_mins.value_or(0) != 0) {  // Python truthiness: 0 means off
    const double minutes = std::chrono::duration<double>(clock_type::now() - s.train_start).count() / 60.0;
    if (minutes > static_cast<double>(*a.training.exit_duration_in_mins)) {
      log(self, "exiting program after " + config::python_float_repr(minutes) + " minutes", true);
      finish_training(self);
      return;
    }
  }
  if (a.training.exit_interval.value_or(0) != 0 && s.iteration % *a.training.exit_interval == 0) {
    log(self, "exiting program at iteration " + std::to_string(s.iteration), true);
    finish_training(self);
    return;
  }
  if (s.iteration < *a.training.train_iters)
    start_iteration(self);
  else
    finish_training(self);
}

void plan_evaluations(coordinator_actor* self, bool final) {
  self->request(self->state.evaluator, caf::infinite, iteration_done{self->state.iteration, final})
      .then([=](evaluation_plan& plan) {
        self->state.plan = std::move(plan);
        self->state.plan_index = 0;
        self->state.final_phase = final;
        next_evaluation(self);
      });
}

void start_iteration(coordinator_actor* self) {
  auto& s = self->state;
  ++s.iteration;
  s.pending = s.replicas.size();
  if (s.inspect) s.inspect->coordinator_activity("running iteration " + std::to_string(s.iteration), s.iteration - 1);
  broadcast(self, s.replicas, run_iteration{s.iteration, s.consumed});
}

void finish_training(coordinator_actor* self) {
  if (!self->state.args.validation.skip_train) log(self, "after training is done", true);
  plan_evaluations(self, /*final=*/true);
}

void all_ready(coordinator_actor* self) {
  auto& s = self->state;
  const auto& vocab = s.vocab;
  log(self, " > padded vocab (size: " + std::to_string(vocab.size) + ") with " + std::to_string(vocab.padded - vocab.size) +
                " dummy tokens (new size: " + std::to_string(vocab.padded) + ")");
  log(self, "after dataloaders are built", true);
  if (s.args.validation.skip_train) {
    log(self, "skipping training (--skip-train is on) ...");
    self->send(s.logger, log_drop_tensorboard{});
    finish_training(self);
    return;
  }
  log(self, "training ...");
  s.train_start = clock_type::now();
  start_iteration(self);
}

caf::behavior coordinator(coordinator_actor* self, config::megatron_args args, comm::process_groups groups,
                          training::vocabulary vocab, caf::actor logger, caf::actor evaluator,
                          std::shared_ptr<job_control> control) {
  auto& s = self->state;
  s.args = std::move(args);
  s.vocab = vocab;
  s.groups = std::make_unique<comm::process_groups>(groups);
  s.logger = logger;
  s.evaluator = evaluator;
  s.control = control;
  const int world = groups.world_size();
  s.stages.resize(world);
  s.agents.resize(world);
  s.replicas.resize(groups.dp());
  try {
    s.inspect = job_inspection::start(self->system(), caf::actor_cast<caf::actor>(self), s.args, stderr);
    if (s.inspect) self->send(self, inspect_tick_atom::value);
  } catch (const std::invalid_argument& e) {
    control->fail(2, std::string("rank 0: bad inspector setting: ") + e.what());
  } catch (const std::exception& e) {
    control->fail(1, std::string("rank 0: the inspector cannot start: ") + e.what());
  }
  // A rank whose actors vanish (its process died, or the connection broke) fails the job.
  self->set_down_handler([=](caf::down_msg& dm) {
    if (self->state.finished) return;
    const auto it = self->state.rank_of.find(dm.source);
    const int rank = it == self->state.rank_of.end() ? -1 : it->second;
    fail(self, 1, "rank 0: communication with rank " + std::to_string(rank) +
                      " failed: its actors are gone (the process exited or the connection broke)");
  });
  return {
      [=](hello_message& h) {
        auto& s = self->state;
        s.stages[h.rank] = h.stage;
        s.agents[h.rank] = h.agent;
        if (h.replica) s.replicas[s.groups->coords_of(h.rank).dp] = h.replica;
        if (s.inspect) s.inspect->rank_joined(h.rank, h.replica ? s.groups->coords_of(h.rank).dp : -1);
        for (const auto& a : {h.stage, h.agent}) {
          s.rank_of[a.address()] = h.rank;
          if (h.rank != 0) self->monitor(a);
        }
        if (++s.hellos < static_cast<int>(s.stages.size())) return;
        // Everyone is here: the config to every stage, each replica its pipeline's stages.
        for (std::size_t d = 0; d < s.replicas.size(); ++d) {
          replica_setup setup{static_cast<int>(d), {}};
          for (int r = 0; r < static_cast<int>(s.stages.size()); ++r)
            if (s.groups->coords_of(r).dp == static_cast<int>(d)) setup.stages.push_back(s.stages[r]);
          self->send(s.replicas[d], setup);
        }
        broadcast(self, s.stages, config_message{s.args});
      },
      [=](stage_ready& r) {
        auto& s = self->state;
        s.has_valid = s.has_valid && r.has_valid;
        s.has_test = s.has_test && r.has_test;
        if (++s.ready == static_cast<int>(s.stages.size())) all_ready(self);
      },
      [=](training::iteration_report& r) {
        auto& s = self->state;
        if (r.has_loss) s.merged = r;  // every replica's last stage holds the same total
        if (--s.pending > 0) return;
        s.consumed += *s.args.training.global_batch_size;
        const auto& m = s.merged;
        s.result.lm_loss.push_back(m.num_tokens > 0 ? m.loss_sum / m.num_tokens : 0.0);
        s.result.grad_norm.push_back(m.has_grad_norm ? m.grad_norm : 0.0);
        s.result.learning_rate.push_back(m.learning_rate);
        s.result.consumed_train_samples = s.consumed;
        self->send(s.logger, log_iteration{m, s.consumed});
        plan_evaluations(self, /*final=*/false);
      },
      [=](training::evaluation_report& r) {
        auto& s = self->state;
        if (r.has_loss) s.eval_merged = r;
        if (--s.pending > 0) return;
        const auto& m = s.eval_merged;
        evaluation_result result{m.split, s.plan.prefixes[s.plan_index], m.num_tokens > 0 ? m.loss_sum / m.num_tokens : 0.0,
                                 s.iteration, s.consumed};
        self->request(s.evaluator, caf::infinite, result).then([=](log_validation& block) {
          self->send(self->state.logger, block);
          ++self->state.plan_index;
          next_evaluation(self);
        });
      },
      [=](abort_job& a) { fail(self, a.exit_code, a.message); },
      // The inspector (inspection.hpp): stage reports, the periodic refresh, hot swap.
      [=](stage_status& st) -> std::int64_t {
        return self->state.inspect ? self->state.inspect->stage_reported(st) : 0;
      },
      [=](inspect_tick_atom) {
        if (!self->state.inspect) return;
        self->state.inspect->tick(static_cast<std::int64_t>(self->mailbox().size()));
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

}  // namespace

caf::actor spawn_coordinator(caf::actor_system& sys, const config::megatron_args& args, const comm::process_groups& groups,
                             training::vocabulary vocab, caf::actor logger, caf::actor evaluator,
                             std::shared_ptr<job_control> control) {
  return sys.spawn(coordinator, args, groups, vocab, std::move(logger), std::move(evaluator), std::move(control));
}

}  // namespace mactor::actors
