// The live inspector, stage side: what a stage records for its reports (stage_reporter), what
// the checkpointer records (side_activity), and the status actor that sends both to the
// coordinator every status_interval (see inspection.hpp).
#include <caf/all.hpp>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "actors/env_settings.hpp"
#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "tensor/memory_ledger.hpp"
#include "training/memory_report.hpp"
#include "training/stage_engine.hpp"

namespace mactor::actors {

using settings::env_or;
using settings::parse_count;
using settings::parse_seconds;

stage_reporter::stage_reporter() {
  const std::string rank = env_or("MACTOR_TEST_STALL_RANK"), at = env_or("MACTOR_TEST_STALL_AT_ITERATION");
  if (rank.empty() || at.empty()) return;
  try {
    stall_rank_ = static_cast<int>(parse_count("MACTOR_TEST_STALL_RANK", rank));
    stall_iteration_ = parse_count("MACTOR_TEST_STALL_AT_ITERATION", at);
    stall_seconds_ = parse_seconds("MACTOR_TEST_STALL_SECONDS", env_or("MACTOR_TEST_STALL_SECONDS", "10"));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "mactor: test stall hook ignored: %s\n", e.what());
    stall_rank_ = -1;
  }
}

void side_activity::set(std::string what, std::int64_t mailbox_depth) {
  std::lock_guard lock(mu_);
  activity_ = std::move(what);
  since_ = std::chrono::steady_clock::now();
  mailbox_ = mailbox_depth;
  ++handled_;
}

side_status side_activity::report() const {
  std::lock_guard lock(mu_);
  return {kind_, activity_, std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count(), mailbox_,
          handled_};
}

void stage_reporter::add_side(std::shared_ptr<const side_activity> side) {
  std::lock_guard lock(mu_);
  sides_.push_back(std::move(side));
}

void stage_reporter::attach(const training::stage_engine* engine) {
  std::lock_guard lock(mu_);
  engine_ = engine;
  started_ = true;
}

bool stage_reporter::past_first_iteration() const {
  std::lock_guard lock(mu_);
  return iterations_begun_ >= 2;
}

bool stage_reporter::started() const {
  std::lock_guard lock(mu_);
  return started_;
}

void stage_reporter::iteration_begun(std::int64_t iteration) {
  std::lock_guard lock(mu_);
  ++iterations_begun_;
  iteration_ = iteration;
  iteration_start_ = clock::now();
}

void stage_reporter::step_begun() {
  std::lock_guard lock(mu_);
  step_start_ = clock::now();
}

void stage_reporter::step_done() {
  const auto step_end = clock::now();
  std::lock_guard lock(mu_);
  if (!engine_) return;
  stage_status t;
  t.timeline_iteration = iteration_;
  for (const auto& e : engine_->last_timeline()) {
    const bool forward = e.what.kind == schedules::op::forward;
    t.ops.push_back(e.waiting ? (forward ? "RF" : "RB") : (forward ? "F" : "B"));
    t.microbatches.push_back(e.what.microbatch);
    t.chunks.push_back(e.what.chunk);
    t.starts.push_back(e.start_s);
    t.ends.push_back(e.end_s);
  }
  // The step after the schedule: gradient sync and the optimizer, on the schedule's clock.
  t.ops.push_back("opt");
  t.microbatches.push_back(-1);
  t.chunks.push_back(0);
  t.starts.push_back(std::chrono::duration<double>(step_start_ - iteration_start_).count());
  t.ends.push_back(std::chrono::duration<double>(step_end - iteration_start_).count());
  for (const auto& load : engine_->last_expert_load()) {
    t.expert_routers.push_back(load.router);
    t.expert_tokens.insert(t.expert_tokens.end(), load.tokens.begin(), load.tokens.end());
  }
  if (iteration_ == wanted_) kept_ = t;  // the one asked for ahead of time is kept until sent
  recent_.push_back(std::move(t));
  while (recent_.size() > 16) recent_.pop_front();
}

void stage_reporter::handled(std::int64_t mailbox_depth) {
  std::lock_guard lock(mu_);
  ++handled_;
  mailbox_ = mailbox_depth;
}

void stage_reporter::set_wanted(std::int64_t iteration) {
  std::lock_guard lock(mu_);
  wanted_ = iteration;
}

std::optional<double> stage_reporter::test_stall(int rank, std::int64_t iteration) const {
  if (rank == stall_rank_ && iteration == stall_iteration_) return stall_seconds_;
  return std::nullopt;
}

void stage_reporter::override_activity(std::optional<std::string> what) {
  std::lock_guard lock(mu_);
  override_ = std::move(what);
  override_since_ = clock::now();
}

stage_status stage_reporter::make(int rank) {
  std::lock_guard lock(mu_);
  stage_status s;
  s.rank = rank;
  s.mailbox_depth = mailbox_;
  s.messages_handled = handled_;
  const auto now = clock::now();
  if (override_) {
    s.activity = *override_;
    s.activity_age_s = std::chrono::duration<double>(now - override_since_).count();
  } else if (engine_) {
    auto [what, since] = engine_->activity();
    s.activity = std::move(what);
    s.activity_age_s = std::chrono::duration<double>(now - since).count();
  } else {
    s.activity = "building the model";
  }
  if (engine_) {
    s.bytes_sent = engine_->bytes_sent();
    s.bytes_received = engine_->bytes_received();
    const auto memory = training::read_rank_memory(rank, true, engine_->device());
    s.memory_allocated = std::int64_t(memory.allocated_bytes);
    s.memory_max_allocated = std::int64_t(memory.max_allocated_bytes);
    s.memory_reserved = std::int64_t(memory.reserved_bytes);
    s.memory_activations = tensor::memory_ledger::host().usage(tensor::memory_kind::activations).current;
  }
  for (const auto& side : sides_) s.sides.push_back(side->report());
  if (wanted_ > 0 && wanted_ != sent_) {
    const stage_status* found = kept_.timeline_iteration == wanted_ ? &kept_ : nullptr;
    for (auto& t : recent_)
      if (t.timeline_iteration == wanted_) found = &t;
    if (found) {
      sent_ = wanted_;
      s.timeline_iteration = wanted_;
      s.ops = found->ops;
      s.microbatches = found->microbatches;
      s.chunks = found->chunks;
      s.starts = found->starts;
      s.ends = found->ends;
      s.expert_routers = found->expert_routers;
      s.expert_tokens = found->expert_tokens;
    }
  }
  return s;
}

namespace {

struct stage_status_state {
  // Not an aggregate: CAF 0.17 constructs a state from the actor pointer when it can, and C++20's
  // parenthesized aggregate initialization would turn that pointer into in_flight = true.
  stage_status_state() = default;
  bool in_flight = false;
  std::optional<std::chrono::steady_clock::time_point> answered;  // the coordinator's last answer
  static inline const char* name = "stage-status";
};

// Rank 0 itself stopped or cut off: the coordinator, which judges the other ranks
// (inspector/hang_rule.hpp), cannot judge itself. A rank whose reports go unanswered for the
// timeout and 5 s more (so that a live coordinator reports first) ends its process; the launcher
// then ends the rest.
void check_coordinator_answers(stage_status_state& st, const stage_reporter& reporter, int rank,
                               const hang_timeouts& timeouts) {
  const auto now = std::chrono::steady_clock::now();
  if (rank == 0 || !st.answered) return;
  const double limit = (reporter.past_first_iteration() && timeouts.after_init_s ? *timeouts.after_init_s
                                                                                  : timeouts.init_s) + 5.0;
  const double quiet = std::chrono::duration<double>(now - *st.answered).count();
  if (quiet <= limit) return;
  std::fprintf(stderr,
               "mactor: hang: rank %d: the coordinator on rank 0 has not answered this rank's status for %.1f s "
               "(the distributed timeout and 5 s): rank 0 is stopped or cut off; ending the job (exit %d)\n",
               rank, quiet, hang_exit_code);
  std::fflush(stderr);
  std::_Exit(hang_exit_code);
}

caf::behavior stage_status_reporting(caf::stateful_actor<stage_status_state>* self, std::shared_ptr<stage_reporter> reporter,
                                     int rank, caf::actor coordinator, hang_timeouts timeouts) {
  self->send(self, status_tick_atom::value);
  return {
      [=](status_tick_atom) {
        self->delayed_send(self, status_interval, status_tick_atom::value);
        if (!reporter->started()) return;
        if (!self->state.answered) self->state.answered = std::chrono::steady_clock::now();
        check_coordinator_answers(self->state, *reporter, rank, timeouts);
        if (self->state.in_flight) return;
        self->state.in_flight = true;
        self->request(coordinator, std::chrono::seconds(10), reporter->make(rank))
            .then(
                [=](std::int64_t wanted) {
                  self->state.in_flight = false;
                  self->state.answered = std::chrono::steady_clock::now();
                  reporter->set_wanted(wanted);
                },
                [=](caf::error&) { self->state.in_flight = false; });
      },
  };
}

}  // namespace

caf::actor spawn_stage_status(caf::actor_system& sys, std::shared_ptr<stage_reporter> reporter, int rank,
                              const caf::actor& coordinator, hang_timeouts timeouts) {
  return sys.spawn(stage_status_reporting, std::move(reporter), rank, coordinator, timeouts);
}

}  // namespace mactor::actors
