// A deterministic actor system for protocol tests: CAF's test coordinator runs one message at a
// time, in a reproducible order, on the test's own thread, with no process, socket or thread of
// its own. Scripted stand-ins (fake stages and agents) speak the training actors' messages and
// write what they receive to one event list, so a test asserts the order of the whole protocol.
#pragma once

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <string>
#include <vector>

#include "actors/config_message.hpp"
#include "actors/messages.hpp"
#include "actors/type_ids.hpp"

namespace mactor::actors::testing {

class actor_fixture {
 public:
  actor_fixture() : sys_(configure(cfg_)), sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())) {}
  ~actor_fixture() { sched_.run(); }

  caf::actor_system& sys() { return sys_; }
  /// Runs every message until all mailboxes are empty; returns how many ran.
  std::size_t run() { return sched_.run(); }
  /// What the stand-ins received, in the order they received it.
  std::vector<std::string> events;

 private:
  static caf::actor_system_config& configure(caf::actor_system_config& cfg) {
    register_message_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    return cfg;
  }
  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
};

/// What a scripted stage answers: every rank is its pipeline's last stage (pp = 1), with loss
/// `loss_per_token` per token over `tokens` tokens.
struct fake_stage_script {
  int rank = 0;
  caf::actor coordinator;
  std::vector<std::string>* events = nullptr;
  double loss_per_token = 2.0, tokens = 10;
};

/// A stage actor's stand-in: answers the config with stage_ready, each run_iteration with an
/// iteration_report to its replica, and quits on stop.
inline caf::behavior fake_stage(caf::event_based_actor* self, fake_stage_script s) {
  auto note = [=](const std::string& what) { s.events->push_back("rank " + std::to_string(s.rank) + " stage: " + what); };
  return {
      [=](config_message&) {
        note("config");
        stage_ready ready;
        ready.rank = s.rank;
        self->send(s.coordinator, ready);
      },
      [=](run_iteration& m) {
        note("iteration " + std::to_string(m.iteration));
        training::iteration_report r;
        r.rank = s.rank;
        r.iteration = m.iteration;
        r.has_loss = true;
        r.loss_sum = s.loss_per_token * s.tokens * static_cast<double>(m.iteration);
        r.num_tokens = s.tokens;
        r.update_successful = true;
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), r);
      },
      [=](stop_message&) {
        note("stop");
        self->quit();
      },
  };
}

/// An agent's stand-in: notes a stop or an abort (and its message).
inline caf::behavior fake_agent(caf::event_based_actor* self, int rank, std::vector<std::string>* events) {
  auto note = [=](const std::string& what) { events->push_back("rank " + std::to_string(rank) + " agent: " + what); };
  return {
      [=](stop_message&) {
        note("stop");
        self->quit();
      },
      [=](abort_job& a) { note("abort: " + a.message); },
  };
}

}  // namespace mactor::actors::testing
