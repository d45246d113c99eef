// The evaluator actor (rank 0): Megatron's evaluation cadence (--eval-interval, the final
// validation and test evaluations) and the validation blocks it prints.
#include <caf/all.hpp>

#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"

namespace mactor::actors {
namespace {

caf::behavior evaluator(caf::event_based_actor* self, std::int64_t eval_interval) {
  return {
      [=](iteration_done& m) {
        counters_of("evaluator").handled.fetch_add(1, std::memory_order_relaxed);
        evaluation_plan plan;
        const std::string at = "iteration " + std::to_string(m.iteration);
        if (m.final) {
          plan.splits = {validation_split, test_split};
          plan.prefixes = {at + " on validation set", at + " on test set"};
        } else if (eval_interval > 0 && m.iteration % eval_interval == 0) {
          plan.splits = {validation_split};
          plan.prefixes = {at};
        }
        return plan;
      },
      [=](evaluation_result& r) {
        counters_of("evaluator").handled.fetch_add(1, std::memory_order_relaxed);
        return log_validation{r.prefix, r.set_index, r.loss, r.iteration, r.consumed};
      },
      [=](stop_message&) { self->quit(); },
  };
}

}  // namespace

caf::actor spawn_evaluator(caf::actor_system& sys, const config::megatron_args& args) {
  return sys.spawn(evaluator, args.validation.eval_interval);
}

}  // namespace mactor::actors
