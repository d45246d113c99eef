// The replica actor: one per data-parallel replica, on its first rank. Starts each iteration and
// evaluation on every stage of its pipeline and merges their reports for the coordinator.
#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/spawn.hpp"

namespace mactor::actors {
namespace {

struct replica_state {
  int replica = 0;
  std::vector<caf::actor> stages;
  caf::actor coordinator;
  std::size_t pending = 0;
  training::iteration_report iteration;
  training::evaluation_report evaluation;
  static inline const char* name = "replica";
};

using replica_actor = caf::stateful_actor<replica_state>;

// The last stage's report carries the loss; every rank carries the same norms and rates.
template <class Report>
void merge(Report& into, const Report& r, bool first) {
  if (first) {
    into = r;
    return;
  }
  if constexpr (requires { r.exit_signal; })  // any rank's SIGTERM
    into.exit_signal = into.exit_signal || r.exit_signal;
  if constexpr (requires { r.energy_joules; }) {  // one meter per host: the hosts' sum
    into.energy_joules += r.energy_joules;
    into.energy_missing = into.energy_missing || r.energy_missing;
  }
  if (r.has_loss) {
    into.has_loss = true;
    into.loss_sum = r.loss_sum;
    into.num_tokens = r.num_tokens;
  }
  if constexpr (requires { r.timings; })  // every rank's timers, for the min and max over ranks
    into.timings.insert(into.timings.end(), r.timings.begin(), r.timings.end());
  if constexpr (requires { r.memory; })  // every rank's memory, for the report_memory lines
    into.memory.insert(into.memory.end(), r.memory.begin(), r.memory.end());
  if constexpr (requires { r.straggler; })  // every rank's times, for --log-straggler's min and max
    into.straggler.insert(into.straggler.end(), r.straggler.begin(), r.straggler.end());
  if constexpr (requires { r.moe_losses; }) {  // the stages' MoE layers: Megatron's sum over the pipeline
    if (into.moe_losses.size() < r.moe_losses.size()) into.moe_losses.resize(r.moe_losses.size(), 0.0);
    for (std::size_t i = 0; i < r.moe_losses.size(); ++i) into.moe_losses[i] += r.moe_losses[i];
  }
  if constexpr (requires { r.mtp_losses; })  // only the last stage's first tp rank reports them
    if (!r.mtp_losses.empty()) into.mtp_losses = r.mtp_losses;
}

template <class Message>
void fan_out(replica_actor* self, const Message& m) {
  auto& s = self->state;
  s.coordinator = caf::actor_cast<caf::actor>(self->current_sender());
  s.pending = s.stages.size();
  for (const auto& stage : s.stages) self->send(stage, m);
}

caf::behavior replica(replica_actor* self, int index) {
  self->state.replica = index;
  return {
      [=](replica_setup& m) { self->state.stages = std::move(m.stages); },
      [=](run_iteration& m) { fan_out(self, m); },
      [=](run_evaluation& m) { fan_out(self, m); },
      [=](training::iteration_report& r) {
        auto& s = self->state;
        merge(s.iteration, r, s.pending == s.stages.size());
        if (--s.pending == 0) self->send(s.coordinator, s.iteration);
      },
      [=](training::evaluation_report& r) {
        auto& s = self->state;
        merge(s.evaluation, r, s.pending == s.stages.size());
        if (--s.pending == 0) self->send(s.coordinator, s.evaluation);
      },
      [=](stop_message&) { self->quit(); },
  };
}

}  // namespace

caf::actor spawn_replica(caf::actor_system& sys, int index) { return sys.spawn(replica, index); }

}  // namespace mactor::actors
