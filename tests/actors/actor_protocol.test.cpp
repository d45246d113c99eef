// The coordinator's protocol with the replica actors, the stages and the agents, run by CAF's
// deterministic scheduler in one thread: the real coordinator, replicas, agents, logger and
// evaluator, and scripted stages (a real stage needs a process's data plane and a thread of its
// own; stage_actor.test.cpp runs one alone). Each test asserts the order of the messages
// delivered and how the job ended.
#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>

#include "actor_fixture.hpp"

using namespace mactor;
using namespace mactor::actors;
using namespace mactor::actors::testing;

namespace {

// The lines the coordinator logs before its first iteration (NullTokenizer: --vocab-size 4096 plus
// its end-of-document token, padded to a multiple of 128).
const std::vector<std::string> startup_lines{
    "log_line \" > padded vocab (size: 4097) with 127 dummy tokens (new size: 4224)\"",
    "log_line \"after dataloaders are built\"", "log_line \"training ...\""};

}  // namespace

TEST_CASE("every stage gets the config, then each iteration in order, then stop, and the log has every iteration") {
  actor_fixture f;
  test_job j(f, args_for(2, 3));
  j.hello();
  f.run();
  INFO(trace_text(f.trace));
  const auto outcome = j.outcome();
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.error.empty());
  // Each replica's last stage reports 2 x iteration per token: the coordinator's loss is that
  // mean, one iteration after another.
  CHECK(outcome.result.lm_loss == std::vector<double>{2.0, 4.0, 6.0});
  CHECK(outcome.result.consumed_train_samples == 6);
  const std::vector<std::string> expected{"config", "run_iteration 1", "run_iteration 2", "run_iteration 3", "stop"};
  CHECK(received_by(f.trace, "rank 0 stage") == expected);
  CHECK(received_by(f.trace, "rank 1 stage") == expected);
  CHECK(received_by(f.trace, "rank 1 agent") == std::vector<std::string>{"stop"});
  CHECK(j.rank_controls[1]->done());
  // No stage hears of iteration 2 before both replicas have reported iteration 1.
  for (const char* replica : {"replica 0", "replica 1"})
    for (const char* stage : {"rank 0 stage", "rank 1 stage"})
      CHECK(position(f.trace, std::string(replica) + " -> coordinator: iteration_report 1 with loss") <
            position(f.trace, "replica " + std::string(stage).substr(5, 1) + " -> " + stage + ": run_iteration 2"));
  const auto text = j.log_text();
  CHECK_THAT(text, Catch::Contains("iteration        3/       3"));
  CHECK_THAT(text, Catch::Contains("lm loss: 6.000000E+00"));
}

TEST_CASE("a one-iteration pipeline job delivers its messages in this order") {
  // Rank 0 is the pipeline's first stage and holds the replica; rank 1 is the last stage, whose
  // report alone carries the loss. Fake stages report no evaluation data, so none runs. The test
  // scheduler runs an actor's next message at once and otherwise actors in the order they became
  // ready (here: spawned), so the config reaches rank 0's stage before the replica's setup
  // arrives, though the coordinator sent the setup first: one valid interleaving, always the same.
  actor_fixture f;
  test_job j(f, args_for(2, 1, /*pp=*/2));
  j.hello();
  f.run();
  INFO(trace_text(f.trace));
  CHECK(j.outcome().exit_code == 0);
  std::vector<std::string> expected{
      "test -> coordinator: hello rank 0",
      "test -> coordinator: hello rank 1",
      "coordinator -> rank 0 stage: config",
      "coordinator -> replica 0: replica_setup 2 stages",
      "coordinator -> rank 1 stage: config",
      "rank 0 stage -> coordinator: stage_ready rank 0",
      "rank 1 stage -> coordinator: stage_ready rank 1",
  };
  for (const auto& line : startup_lines) expected.push_back("coordinator -> logger: " + line);
  const std::vector<std::string> rest{
      "coordinator -> replica 0: run_iteration 1",
      "replica 0 -> rank 0 stage: run_iteration 1",
      "replica 0 -> rank 1 stage: run_iteration 1",
      "rank 0 stage -> replica 0: iteration_report 1",
      "rank 1 stage -> replica 0: iteration_report 1 with loss",
      "replica 0 -> coordinator: iteration_report 1 with loss",
      "coordinator -> logger: log_iteration 1",
      "coordinator -> evaluator: iteration_done 1",
      "evaluator -> coordinator: evaluation_plan none",
      "coordinator -> logger: log_line \"after training is done\"",
      "coordinator -> evaluator: iteration_done 1 final",
      "evaluator -> coordinator: evaluation_plan 1 2",
      "coordinator -> rank 0 stage: stop",
      "coordinator -> rank 1 stage: stop",
      "coordinator -> replica 0: stop",
      "coordinator -> rank 0 agent: stop",
      "coordinator -> rank 1 agent: stop",
      "coordinator -> logger: stop",
      "coordinator -> evaluator: stop",
  };
  expected.insert(expected.end(), rest.begin(), rest.end());
  CHECK(f.trace == expected);
}

TEST_CASE("an iteration's record reaches the logger before its validation block and before the next iteration starts") {
  actor_fixture f;
  std::vector<fake_stage_script> scripts(2);
  for (auto& s : scripts) s.evaluates = true;
  test_job j(f, args_for(2, 3, 1, {"--eval-interval", "2", "--eval-iters", "1"}), scripts);
  j.hello();
  f.run();
  INFO(trace_text(f.trace));
  CHECK(j.outcome().exit_code == 0);
  std::vector<std::string> expected = startup_lines;
  const std::vector<std::string> rest{
      "log_iteration 1",
      "log_iteration 2",
      "log_timers",
      "log_validation \"iteration 2\"",
      "log_iteration 3",
      "log_line \"after training is done\"",
      "log_timers",
      "log_validation \"iteration 3 on validation set\"",
      "log_timers",
      "log_validation \"iteration 3 on test set\"",
      "stop",
  };
  expected.insert(expected.end(), rest.begin(), rest.end());
  CHECK(received_by(f.trace, "logger") == expected);
  // Iteration k+1 starts on no replica before iteration k's record went to the logger, and the
  // validation after iteration 2 runs between the two.
  for (int k = 1; k < 3; ++k)
    for (const char* replica : {"replica 0", "replica 1"})
      CHECK(position(f.trace, "coordinator -> logger: log_iteration " + std::to_string(k)) <
            position(f.trace, "coordinator -> " + std::string(replica) + ": run_iteration " + std::to_string(k + 1)));
  CHECK(received_by(f.trace, "rank 1 stage") ==
        std::vector<std::string>{"config", "run_iteration 1", "run_iteration 2", "run_evaluation 1", "run_iteration 3",
                                 "run_evaluation 1", "run_evaluation 2", "stop"});
}

TEST_CASE("no stage starts before every rank has said hello") {
  actor_fixture f;
  test_job j(f, args_for(3, 1));
  j.hello(0);
  j.hello(2);
  f.run();
  INFO(trace_text(f.trace));
  for (int r = 0; r < 3; ++r) CHECK(received_by(f.trace, "rank " + std::to_string(r) + " stage").empty());
  CHECK_FALSE(j.control->done());
  j.hello(1);
  f.run();
  INFO(trace_text(f.trace));
  CHECK(j.outcome().exit_code == 0);
  CHECK(received_by(f.trace, "rank 1 stage") == std::vector<std::string>{"config", "run_iteration 1", "stop"});
}

TEST_CASE("a rank whose stage dies before it is ready ends the job with an error naming that rank, and every agent hears the abort") {
  actor_fixture f;
  test_job j(f, args_for(3, 5));
  j.hello();
  // Rank 2's process dies before its stage answers the config.
  caf::anon_send_exit(j.stages[2], caf::exit_reason::kill);
  f.run();
  INFO(trace_text(f.trace));
  const auto outcome = j.outcome();
  CHECK(outcome.error == lost_rank_error(2));
  j.check_aborted(outcome, 1, {0, 1, 2});
  for (int r = 0; r < 3; ++r) {
    REQUIRE(j.rank_controls[r]->done());
    CHECK(j.rank_controls[r]->wait().error == outcome.error);
  }
  // The surviving stages never started an iteration, and no stage is told to stop: a failed
  // job's stages may be blocked, so each rank's agent ends its process instead.
  CHECK(received_by(f.trace, "rank 0 stage") == std::vector<std::string>{"config"});
  CHECK(received_by(f.trace, "rank 1 stage") == std::vector<std::string>{"config"});
}

TEST_CASE("a stage that dies in the middle of an iteration ends the job naming its rank, and that iteration is never logged") {
  actor_fixture f;
  std::vector<fake_stage_script> scripts(3);
  scripts[1].die_at = 2;
  test_job j(f, args_for(3, 4), scripts);
  j.hello();
  f.run();
  INFO(trace_text(f.trace));
  const auto outcome = j.outcome();
  CHECK(outcome.error == lost_rank_error(1));
  j.check_aborted(outcome, 1, {0, 1, 2});
  // The coordinator's last message is the news of rank 1's stage; iteration 2 never completes.
  const auto heard = received_by(f.trace, "coordinator");
  CHECK(heard.back() == "down rank 1 stage (exit_reason(remote_link_unreachable))");
  CHECK(std::count(heard.begin(), heard.end(), "iteration_report 1 with loss") == 3);
  CHECK(std::count(heard.begin(), heard.end(), "iteration_report 2 with loss") < 3);
  const auto logged = received_by(f.trace, "logger");
  CHECK(std::count(logged.begin(), logged.end(), "log_iteration 1") == 1);
  CHECK(std::count(logged.begin(), logged.end(), "log_iteration 2") == 0);
  for (int r : {0, 2})
    CHECK(received_by(f.trace, "rank " + std::to_string(r) + " stage") ==
          std::vector<std::string>{"config", "run_iteration 1", "run_iteration 2"});
}

TEST_CASE("a rank whose agent vanishes ends the job naming that rank") {
  actor_fixture f;
  test_job j(f, args_for(2, 3));
  j.hello();
  REQUIRE(f.run_until("coordinator -> logger: log_iteration 1"));
  caf::anon_send_exit(j.agents[1], caf::exit_reason::remote_link_unreachable);
  f.run();
  INFO(trace_text(f.trace));
  const auto outcome = j.outcome();
  CHECK(outcome.error == lost_rank_error(1));
  j.check_aborted(outcome, 1, {0});
  CHECK(received_by(f.trace, "rank 0 stage") ==
        std::vector<std::string>{"config", "run_iteration 1", "run_iteration 2"});
}

TEST_CASE("when the coordinator is gone every other rank's agent ends its process with an error naming rank 0") {
  actor_fixture f;
  test_job j(f, args_for(3, 3));
  j.hello();
  REQUIRE(f.run_until("coordinator -> logger: log_iteration 1"));
  caf::anon_send_exit(j.coordinator, caf::exit_reason::remote_link_unreachable);
  f.run();
  INFO(trace_text(f.trace));
  for (int r : {1, 2}) {
    const std::string agent = "rank " + std::to_string(r) + " agent";
    CHECK(received_by(f.trace, agent) == std::vector<std::string>{"down coordinator (exit_reason(remote_link_unreachable))"});
    REQUIRE(j.rank_controls[r]->done());
    const auto outcome = j.rank_controls[r]->wait();
    CHECK(outcome.exit_code == 1);
    CHECK(outcome.error == "rank " + std::to_string(r) +
                               ": communication with rank 0 failed: the coordinator is gone (its process exited or "
                               "the connection broke)");
  }
  // Rank 0's agent does not watch its own process's coordinator.
  CHECK(received_by(f.trace, "rank 0 agent").empty());
}
