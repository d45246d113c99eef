// The real stage actor in the coordinator's protocol: one rank (world size 1, so no data plane and
// no collective to wait in) trains a tiny GPT on mock data in this process, its stage spawned on
// CAF's test scheduler (spawn_scheduled_stage) with the real coordinator, replica, agent, logger
// and evaluator around it. Each test asserts the messages the stage took part in, in order.
#include <catch2/catch.hpp>
#include <cmath>

#include "actor_fixture.hpp"
#include "actors/inspection.hpp"
#include "training/parallel_context.hpp"

using namespace mactor;
using namespace mactor::actors;
using namespace mactor::actors::testing;

namespace {

// What run_job gives rank 0's stage: the process's parallel context and job_control, no
// checkpointer (no --save), a reporter for the inspector.
test_job::stage_maker real_stage(actor_fixture& f, training::parallel_context& ctx) {
  return [&f, &ctx](int, std::shared_ptr<job_control> control) {
    return spawn_scheduled_stage(f.sys(), ctx, std::move(control), caf::actor{}, std::make_shared<stage_reporter>());
  };
}

}  // namespace

TEST_CASE("a real stage builds its model from the config, answers each iteration and evaluation through its replica, and stops") {
  const auto args = args_for(1, 2, 1, {"--eval-iters", "1"});
  training::parallel_context ctx(args, comm::launch_env{});  // outlives the actor system below
  actor_fixture f;
  test_job j(f, args, {}, real_stage(f, ctx));
  j.hello();
  f.run();
  INFO(trace_text(f.trace));
  const auto outcome = j.outcome();
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.error.empty());
  CHECK(received_by(f.trace, "rank 0 stage") == std::vector<std::string>{"config", "run_iteration 1", "run_iteration 2",
                                                                         "run_evaluation 1", "run_evaluation 2", "stop"});
  CHECK(received_by(f.trace, "replica 0") ==
        std::vector<std::string>{"replica_setup 1 stages", "run_iteration 1", "iteration_report 1 with loss",
                                 "run_iteration 2", "iteration_report 2 with loss", "run_evaluation 1",
                                 "evaluation_report 1 with loss", "run_evaluation 2", "evaluation_report 2 with loss",
                                 "stop"});
  // The stage is ready only after its config, and its replica starts nothing before that.
  CHECK(position(f.trace, "coordinator -> rank 0 stage: config") <
        position(f.trace, "rank 0 stage -> coordinator: stage_ready rank 0"));
  CHECK(position(f.trace, "rank 0 stage -> coordinator: stage_ready rank 0") <
        position(f.trace, "coordinator -> replica 0: run_iteration 1"));
  // A freshly initialised GPT predicts about uniformly: its loss is near ln(padded vocabulary).
  REQUIRE(outcome.result.lm_loss.size() == 2);
  for (double loss : outcome.result.lm_loss) CHECK(std::abs(loss - std::log(4224.0)) < 1.0);
  const auto text = j.log_text();
  CHECK_THAT(text, Catch::Contains("iteration        2/       2"));
  CHECK_THAT(text, Catch::Contains("validation loss at iteration 2 on validation set"));
  CHECK_THAT(text, Catch::Contains("validation loss at iteration 2 on test set"));
}

TEST_CASE("a real stage that cannot read its data ends the job with exit status 2 naming the prefix, before training starts") {
  const std::string missing = "/nonexistent/mactor_actor_tests/corpus_text_document";
  auto flags = tiny_gpt_flags(1, 2);
  flags.erase(std::find(flags.begin(), flags.end(), "--mock-data"));
  flags.insert(flags.end(), {"--data-path", missing, "--split", "1,0,0"});
  const auto args = resolve_flags(flags, 1);
  training::parallel_context ctx(args, comm::launch_env{});
  actor_fixture f;
  test_job j(f, args, {}, real_stage(f, ctx));
  j.hello();
  f.run();
  INFO(trace_text(f.trace));
  const auto outcome = j.outcome();
  CHECK_THAT(outcome.error, Catch::Contains(missing));
  // The stage's error goes to the coordinator, which passes it to every agent and ends the job.
  j.check_aborted(outcome, 2, {0});
  const std::string abort = abort_entry(2, outcome.error);
  CHECK(received_by(f.trace, "rank 0 stage") == std::vector<std::string>{"config"});
  CHECK(position(f.trace, "rank 0 stage -> coordinator: " + abort) < position(f.trace, "coordinator -> rank 0 agent: " + abort));
  const auto logged = received_by(f.trace, "logger");
  CHECK(std::find(logged.begin(), logged.end(), "log_line \"training ...\"") == logged.end());
  CHECK(received_by(f.trace, "replica 0") == std::vector<std::string>{"replica_setup 1 stages"});
}
