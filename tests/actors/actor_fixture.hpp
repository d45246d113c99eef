// A deterministic actor system for protocol tests: CAF's test coordinator runs one message at a
// time, in a reproducible order, on the test's own thread, with no process, socket or thread of
// its own. Every delivery is written to a trace ("coordinator -> replica 0: run_iteration 1"), so a
// test asserts the order of the whole protocol between the real actors and scripted stand-ins.
//
// CAF's own test DSL (caf/test/dsl.hpp: expect(...), from(a).to(b)) is written against CAF's unit
// test framework (CAF_CHECK, caf::test::engine); rather than emulate that under Catch2, this
// fixture drives caf::scheduler::test_coordinator directly and peeks at each mailbox as the DSL
// does (abstract_actor::peek_at_next_mailbox_element) before the message runs.
#pragma once

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/config_message.hpp"
#include "actors/job.hpp"
#include "actors/job_control.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "actors/type_ids.hpp"
#include "config/resolve.hpp"

namespace mactor::actors::testing {

class actor_fixture {
 public:
  actor_fixture() : sys_(configure(cfg_)), sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())) {}
  ~actor_fixture() { sched_.run(); }

  caf::actor_system& sys() { return sys_; }
  /// The name `a` has in the trace ("coordinator", "rank 1 stage").
  void name(const caf::actor& a, std::string name) { names_[a.id()] = std::move(name); }

  /// Delivers the next message (or starts the next actor spawned), writing the delivery to the
  /// trace; false when no mailbox holds anything.
  bool step() {
    if (!sched_.has_job()) return false;
    if (auto* a = dynamic_cast<caf::abstract_actor*>(&sched_.next_job<caf::resumable>()))
      if (const auto* e = a->peek_at_next_mailbox_element())
        trace.push_back(name_of(e->sender ? e->sender->id() : caf::invalid_actor_id) + " -> " + name_of(a->id()) + ": " +
                        describe(e->content()));
    sched_.run_once();  // one message: the test coordinator resumes an actor with a throughput of 1
    return true;
  }
  /// Delivers messages one at a time until every mailbox is empty; returns how many steps ran.
  std::size_t run() {
    std::size_t n = 0;
    while (step()) ++n;
    return n;
  }
  /// Delivers messages until `entry` (a trace line) has been delivered; false if every mailbox
  /// empties first.
  bool run_until(const std::string& entry) {
    for (std::size_t seen = trace.size(); step(); seen = trace.size())
      if (trace.size() > seen && trace.back() == entry) return true;
    return false;
  }

  /// Every message delivered, in delivery order: "sender -> receiver: what". A message sent from
  /// outside any actor (anon_send) comes from "test".
  std::vector<std::string> trace;

 private:
  static caf::actor_system_config& configure(caf::actor_system_config& cfg) {
    register_message_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    return cfg;
  }
  std::string name_of(caf::actor_id id) const {
    if (id == caf::invalid_actor_id) return "test";
    const auto it = names_.find(id);
    return it == names_.end() ? "actor #" + std::to_string(id) : it->second;
  }
  // A message in a few deterministic words (no timestamps, no actor ids).
  std::string describe(const caf::type_erased_tuple& c) const {
    using namespace std::string_literals;
    const auto n = [](auto v) { return std::to_string(v); };
    if (const auto* m = as<hello_message>(c)) return "hello rank " + n(m->rank);
    if (as<config_message>(c)) return "config";
    if (const auto* m = as<stage_ready>(c)) return "stage_ready rank " + n(m->rank);
    if (const auto* m = as<replica_setup>(c)) return "replica_setup " + n(m->stages.size()) + " stages";
    if (const auto* m = as<run_iteration>(c)) return "run_iteration " + n(m->iteration);
    if (const auto* m = as<run_evaluation>(c)) return "run_evaluation " + n(m->split);
    if (const auto* m = as<training::iteration_report>(c))
      return "iteration_report " + n(m->iteration) + (m->has_loss ? " with loss" : "");
    if (const auto* m = as<training::evaluation_report>(c))
      return "evaluation_report " + n(m->split) + (m->has_loss ? " with loss" : "");
    if (const auto* m = as<log_line>(c)) return "log_line \"" + m->text + "\"";
    if (const auto* m = as<log_iteration>(c)) return "log_iteration " + n(m->report.iteration);
    if (const auto* m = as<log_validation>(c)) return "log_validation \"" + m->prefix + "\"";
    if (as<log_timers>(c)) return "log_timers";
    if (as<log_drop_tensorboard>(c)) return "log_drop_tensorboard";
    if (const auto* m = as<iteration_done>(c)) return "iteration_done " + n(m->iteration) + (m->final ? " final" : "");
    if (const auto* m = as<evaluation_plan>(c)) {
      std::string splits;
      for (int s : m->splits) splits += " " + n(s);
      return "evaluation_plan" + (splits.empty() ? " none"s : splits);
    }
    if (const auto* m = as<evaluation_result>(c)) return "evaluation_result " + n(m->split);
    if (as<stop_message>(c)) return "stop";
    if (const auto* m = as<abort_job>(c)) return "abort_job exit " + n(m->exit_code) + " \"" + m->message + "\"";
    if (as<resume_message>(c)) return "resume";
    if (const auto* m = as<caf::down_msg>(c)) return "down " + name_of(m->source.id()) + " (" + to_string(m->reason) + ")";
    if (const auto* m = as<caf::exit_msg>(c)) return "exit (" + to_string(m->reason) + ")";
    return c.stringify();
  }
  template <class T>
  static const T* as(const caf::type_erased_tuple& c) {
    return c.match_elements<T>() ? &c.get_as<T>(0) : nullptr;
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  std::map<caf::actor_id, std::string> names_;
};

/// The trace one delivery a line, for a failing test's message.
inline std::string trace_text(const std::vector<std::string>& trace) {
  std::string text = "trace:\n";
  for (const auto& e : trace) text += "  " + e + "\n";
  return text;
}

/// What `who` received, in order, without the sender ("run_iteration 1", "stop").
inline std::vector<std::string> received_by(const std::vector<std::string>& trace, const std::string& who) {
  std::vector<std::string> out;
  const std::string to = " -> " + who + ": ";
  for (const auto& e : trace)
    if (const auto at = e.find(to); at != std::string::npos) out.push_back(e.substr(at + to.size()));
  return out;
}

/// Where `entry` sits in the trace; fails the test if it is not there.
inline std::size_t position(const std::vector<std::string>& trace, const std::string& entry) {
  const auto it = std::find(trace.begin(), trace.end(), entry);
  INFO("trace entry: " << entry);
  REQUIRE(it != trace.end());
  return static_cast<std::size_t>(it - trace.begin());
}

/// The abort_job an agent receives, as the trace writes it ("abort_job exit 1 \"...\"").
inline std::string abort_entry(int exit_code, const std::string& error) {
  return "abort_job exit " + std::to_string(exit_code) + " \"" + error + "\"";
}

/// The error rank 0's coordinator ends the job with when rank `r`'s actors are gone.
inline std::string lost_rank_error(int r) {
  return "rank 0: communication with rank " + std::to_string(r) +
         " failed: its actors are gone (the process exited or the connection broke)";
}

/// What a scripted stage does: answer the config with stage_ready, each run_iteration with an
/// iteration_report to its replica (with loss `loss_per_token` x iteration per token over
/// `tokens` tokens when it is its pipeline's last stage), each run_evaluation with an
/// evaluation_report (loss `loss_per_token`), and quit on stop.
struct fake_stage_script {
  int rank = 0;
  caf::actor coordinator;
  bool last_stage = true;
  double loss_per_token = 2.0, tokens = 10;
  bool evaluates = false;  ///< has validation and test data (else the coordinator never evaluates)
  /// > 0: at run_iteration `die_at` the stage vanishes as a dead process's actors do
  /// (CAF's middleman reports them gone with remote_link_unreachable).
  std::int64_t die_at = 0;
};

/// A stage actor's stand-in: a real stage needs a process's data plane and its own thread.
inline caf::behavior fake_stage(caf::event_based_actor* self, fake_stage_script s) {
  auto batch = std::make_shared<std::int64_t>(0);  // the config's global batch: each iteration trains on it
  return {
      [=](config_message& m) {
        *batch = m.args.training.global_batch_size.value_or(0);
        stage_ready ready;
        ready.rank = s.rank;
        ready.valid_sets = s.evaluates ? 1 : 0;
        ready.has_test = s.evaluates;
        self->send(s.coordinator, ready);
      },
      [=](run_iteration& m) {
        if (m.iteration == s.die_at) {
          self->quit(caf::exit_reason::remote_link_unreachable);
          return;
        }
        training::iteration_report r;
        r.rank = s.rank;
        r.iteration = m.iteration;
        r.has_loss = s.last_stage;
        r.global_batch_size = *batch;
        if (s.last_stage) {
          r.loss_sum = s.loss_per_token * s.tokens * static_cast<double>(m.iteration);
          r.num_tokens = s.tokens;
        }
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), r);
      },
      [=](run_evaluation& m) {
        training::evaluation_report r;
        r.rank = s.rank;
        r.split = m.split;
        r.has_loss = s.last_stage;
        if (s.last_stage) {
          r.loss_sum = s.loss_per_token * s.tokens;
          r.num_tokens = s.tokens;
        }
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), r);
      },
      [=](stop_message&) { self->quit(); },
  };
}

/// The flags of a tiny GPT job on mock data: `world` ranks, pipelines of `pp` stages, one micro
/// batch per replica per iteration, a log line every iteration.
inline std::vector<std::string> tiny_gpt_flags(int world, int train_iters, int pp = 1) {
  return {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
          "--max-position-embeddings", "32", "--micro-batch-size", "1", "--global-batch-size", std::to_string(world / pp),
          "--train-iters", std::to_string(train_iters), "--lr", "1e-3", "--mock-data", "--tokenizer-type",
          "NullTokenizer", "--vocab-size", "4096", "--log-interval", "1", "--pipeline-model-parallel-size",
          std::to_string(pp)};
}

/// `flags` resolved and validated as pretrain_gpt does on rank 0 of `world`.
inline config::megatron_args resolve_flags(const std::vector<std::string>& flags, int world) {
  auto r = config::resolve(flags, "pretrain_gpt", {0, world});
  INFO(r.err);
  REQUIRE_FALSE(r.exit_status.has_value());
  return r.args;
}

/// tiny_gpt_flags plus `extra`, resolved.
inline config::megatron_args args_for(int world, int train_iters, int pp = 1, std::vector<std::string> extra = {}) {
  auto flags = tiny_gpt_flags(world, train_iters, pp);
  flags.insert(flags.end(), extra.begin(), extra.end());
  return resolve_flags(flags, world);
}

/// A job as run_job builds it on each rank, all in one actor system: the real coordinator (no
/// inspector), logger (into a temporary file) and evaluator of rank 0; on every rank a real agent
/// with its own job_control (rank 0's is the coordinator's, as in run_job), a real replica on each
/// pipeline's first rank, and a scripted stage (or, given `real_stage`, the stage it makes for a
/// rank and that rank's job_control). Names: "coordinator", "logger", "evaluator", "replica D",
/// "rank R stage", "rank R agent".
struct test_job {
  actor_fixture& f;
  config::megatron_args args;
  comm::process_groups groups;
  std::shared_ptr<job_control> control = std::make_shared<job_control>();
  std::vector<std::shared_ptr<job_control>> rank_controls;  // [0] is `control`
  std::FILE* log = std::tmpfile();
  caf::actor coordinator, logger, evaluator;
  std::vector<caf::actor> stages, agents, replicas;  // replicas[r]: invalid where no replica lives

  using stage_maker = std::function<caf::actor(int rank, std::shared_ptr<job_control> rank_control)>;

  test_job(actor_fixture& fixture, config::megatron_args a, std::vector<fake_stage_script> scripts = {},
           stage_maker real_stage = {})
      : f(fixture), args(std::move(a)),
        groups(static_cast<int>(args.derived.world_size), 0, {1, static_cast<int>(args.distributed.pipeline_model_parallel_size)}) {
    ::setenv("MACTOR_INSPECT", "off", 1);
    const int world = groups.world_size();
    const auto vocab = training::vocabulary_from_args(args);
    logger = spawn_logger(f.sys(), args, log, world, vocab.padded);
    evaluator = spawn_evaluator(f.sys(), args);
    coordinator = spawn_coordinator(f.sys(), args, groups, vocab, logger, evaluator, control);
    f.name(coordinator, "coordinator");
    f.name(logger, "logger");
    f.name(evaluator, "evaluator");
    for (int r = 0; r < world; ++r) {
      auto script = r < static_cast<int>(scripts.size()) ? scripts[r] : fake_stage_script{};
      script.rank = r;
      script.coordinator = coordinator;
      const auto c = comm::process_groups(world, r, {1, groups.pp()}).coords();
      script.last_stage = c.pp == groups.pp() - 1;
      rank_controls.push_back(r == 0 ? control : std::make_shared<job_control>());
      stages.push_back(real_stage ? real_stage(r, rank_controls[r]) : f.sys().spawn(fake_stage, script));
      agents.push_back(spawn_agent(f.sys(), rank_controls[r], r, r == 0 ? caf::actor{} : coordinator));
      replicas.push_back(c.pp == 0 ? spawn_replica(f.sys(), c.dp) : caf::actor{});
      f.name(stages[r], "rank " + std::to_string(r) + " stage");
      f.name(agents[r], "rank " + std::to_string(r) + " agent");
      if (replicas[r]) f.name(replicas[r], "replica " + std::to_string(c.dp));
    }
  }
  ~test_job() { std::fclose(log); }

  /// Rank `r` introduces its actors, as run_job does.
  void hello(int r) { caf::anon_send(coordinator, hello_message{r, stages[r], agents[r], replicas[r]}); }
  void hello() {
    for (int r = 0; r < static_cast<int>(stages.size()); ++r) hello(r);
  }
  /// How the job ended; fails the test if rank 0's job_control has no outcome yet.
  job_outcome outcome() {
    REQUIRE(control->done());
    return control->wait();
  }
  /// Checks that `o` has `exit_code` and that the agent of each of `ranks` received the abort
  /// carrying `o`'s error, and nothing else.
  void check_aborted(const job_outcome& o, int exit_code, const std::vector<int>& ranks) {
    CHECK(o.exit_code == exit_code);
    for (int r : ranks) {
      const std::string agent = "rank " + std::to_string(r) + " agent";
      INFO(agent);
      CHECK(received_by(f.trace, agent) == std::vector<std::string>{abort_entry(exit_code, o.error)});
    }
  }
  std::string log_text() {
    std::fflush(log);
    std::rewind(log);
    std::string text;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, log)) text.append(buffer, n);
    return text;
  }
};

}  // namespace mactor::actors::testing
