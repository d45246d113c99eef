// The coordinator's evaluations: the evaluator's plan after an iteration (--eval-interval, the
// final validation and test), each split (and each validation set) run on every replica in turn,
// and each result's block sent to the logger before the next evaluation starts.
#include <caf/all.hpp>

#include "actors/coordinator_state.hpp"
#include "actors/inspection.hpp"
#include "actors/messages.hpp"

namespace mactor::actors::coordination {

// Runs the next split of the current evaluation plan, or goes on when the plan is done.
void next_evaluation(coordinator_actor* self) {
  auto& s = self->state;
  while (s.plan_index < s.plan.splits.size()) {
    const int split = s.plan.splits[s.plan_index];
    if ((split == validation_split && s.valid_sets > 0) || (split == test_split && s.has_test)) {
      s.reports_pending = s.replicas.size();
      const int set = split == validation_split ? s.plan_set : 0;
      if (s.inspect)
        s.inspect->coordinator_activity("evaluating split " + std::to_string(split) +
                                            (set > 0 ? " set " + std::to_string(set) : std::string()) +
                                            " after iteration " + std::to_string(s.iteration),
                                        s.iteration);
      if (s.ft) s.ft->evaluation_start(clock_type::now());
      broadcast(self, s.replicas, run_evaluation{split, set});
      return;
    }
    ++s.plan_index;
  }
  if (s.final_phase) {
    finish_ok(self);
    return;
  }
  after_iteration(self);
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

// A stage's share of an evaluation; the last one hands the result to the evaluator, whose block
// goes to the logger before the next evaluation starts.
void on_evaluation_report(coordinator_actor* self, const training::evaluation_report& r) {
  auto& s = self->state;
  s.timings.insert(s.timings.end(), r.timings.begin(), r.timings.end());
  if (r.has_loss) s.eval_merged = r;
  if (--s.reports_pending > 0) return;
  const auto& m = s.eval_merged;
  // Megatron names every validation set's block and tags with its index once there can be several.
  const bool numbered = m.split == validation_split && s.args.validation.multiple_validation_sets;
  evaluation_result result{m.split, s.plan.prefixes[s.plan_index], numbered ? s.plan_set : -1,
                           m.num_tokens > 0 ? m.loss_sum / m.num_tokens : 0.0, s.iteration, s.consumed};
  send_logger(self, log_timers{{"evaluate"}, std::exchange(s.timings, {})});  // Megatron's level-0 timer
  self->request(s.evaluator, caf::infinite, result).then([=](log_validation& block) {
    send_logger(self, block);
    auto& st = self->state;
    // The next validation set, or the plan's next split.
    if (st.plan.splits[st.plan_index] == validation_split && ++st.plan_set < st.valid_sets) {
      next_evaluation(self);
      return;
    }
    st.plan_set = 0;
    ++st.plan_index;
    next_evaluation(self);
  });
}

}  // namespace mactor::actors::coordination
