// The coordinator's protocol with the replica actors and the stages, run by CAF's deterministic
// scheduler in one thread: the real coordinator, replicas, logger and evaluator, and scripted
// stages and agents (a real stage needs a process's data plane). Each test asserts the order of
// the messages the stand-ins received and how the job ended.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "actor_fixture.hpp"
#include "actors/job_control.hpp"
#include "actors/spawn.hpp"
#include "config/resolve.hpp"

using namespace mactor;
using namespace mactor::actors;
using namespace mactor::actors::testing;

namespace {

config::megatron_args args_for(int world, int train_iters) {
  const std::vector<std::string> flags{"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
                                       "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size",
                                       "1", "--global-batch-size", std::to_string(world), "--train-iters",
                                       std::to_string(train_iters), "--lr", "1e-3", "--mock-data", "--tokenizer-type",
                                       "NullTokenizer", "--vocab-size", "4096", "--log-interval", "1"};
  auto r = config::resolve(flags, "pretrain_gpt", {0, world});
  INFO(r.err);
  REQUIRE_FALSE(r.exit_status.has_value());
  return r.args;
}

// A job of `world` data-parallel ranks (pp = tp = 1): the real coordinator (no inspector),
// replicas, logger (into a temporary file) and evaluator; a fake stage and agent per rank.
struct job {
  actor_fixture& f;
  std::shared_ptr<job_control> control = std::make_shared<job_control>();
  std::FILE* log = std::tmpfile();
  caf::actor coordinator;
  std::vector<caf::actor> stages, agents, replicas;

  job(actor_fixture& fixture, int world, int train_iters) : f(fixture) {
    ::setenv("MACTOR_INSPECT", "off", 1);
    const auto args = args_for(world, train_iters);
    const auto vocab = training::vocabulary_from_args(args);
    auto logger = spawn_logger(f.sys(), args, log, world, vocab.padded);
    auto evaluator = spawn_evaluator(f.sys(), args);
    coordinator = spawn_coordinator(f.sys(), args, comm::process_groups(world, 0, {}), vocab, logger, evaluator, control);
    for (int r = 0; r < world; ++r) {
      stages.push_back(f.sys().spawn(fake_stage, fake_stage_script{r, coordinator, &f.events}));
      agents.push_back(f.sys().spawn(fake_agent, r, &f.events));
      replicas.push_back(spawn_replica(f.sys(), r));
    }
  }
  ~job() { std::fclose(log); }

  // Every rank introduces its actors, as run_job does.
  void hello() {
    for (std::size_t r = 0; r < stages.size(); ++r)
      caf::anon_send(coordinator, hello_message{static_cast<int>(r), stages[r], agents[r], replicas[r]});
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

std::vector<std::string> events_of(const std::vector<std::string>& events, const std::string& who) {
  std::vector<std::string> out;
  for (const auto& e : events)
    if (e.rfind(who, 0) == 0) out.push_back(e.substr(who.size()));
  return out;
}

}  // namespace

TEST_CASE("every stage gets the config, then each iteration in order, then stop, and the log has every iteration") {
  actor_fixture f;
  job j(f, 2, 3);
  j.hello();
  f.run();
  REQUIRE(j.control->done());
  const auto outcome = j.control->wait();
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.error.empty());
  // Two replicas report 2 x 10 x iteration over 10 tokens each: the coordinator's loss is the
  // last stage's mean, one iteration after another.
  CHECK(outcome.result.lm_loss == std::vector<double>{2.0, 4.0, 6.0});
  CHECK(outcome.result.consumed_train_samples == 6);
  const std::vector<std::string> expected{"config", "iteration 1", "iteration 2", "iteration 3", "stop"};
  for (const char* rank : {"rank 0 stage: ", "rank 1 stage: "}) CHECK(events_of(f.events, rank) == expected);
  for (const char* agent : {"rank 0 agent: ", "rank 1 agent: "}) CHECK(events_of(f.events, agent) == std::vector<std::string>{"stop"});
  // No stage hears of iteration 2 before both have answered iteration 1.
  const auto position = [&](const std::string& e) { return std::find(f.events.begin(), f.events.end(), e) - f.events.begin(); };
  CHECK(position("rank 0 stage: iteration 2") > position("rank 1 stage: iteration 1"));
  CHECK(position("rank 1 stage: iteration 2") > position("rank 0 stage: iteration 1"));
  const auto text = j.log_text();
  CHECK_THAT(text, Catch::Contains("iteration        3/       3"));
  CHECK_THAT(text, Catch::Contains("lm loss: 6.000000E+00"));
}

TEST_CASE("no stage starts before every rank has said hello") {
  actor_fixture f;
  job j(f, 3, 1);
  caf::anon_send(j.coordinator, hello_message{0, j.stages[0], j.agents[0], j.replicas[0]});
  caf::anon_send(j.coordinator, hello_message{2, j.stages[2], j.agents[2], j.replicas[2]});
  f.run();
  CHECK(f.events.empty());
  CHECK_FALSE(j.control->done());
  caf::anon_send(j.coordinator, hello_message{1, j.stages[1], j.agents[1], j.replicas[1]});
  f.run();
  REQUIRE(j.control->done());
  CHECK(j.control->wait().exit_code == 0);
  CHECK(events_of(f.events, "rank 1 stage: ") == std::vector<std::string>{"config", "iteration 1", "stop"});
}

TEST_CASE("a rank whose stage dies ends the job with an error naming that rank, and every agent hears the abort") {
  actor_fixture f;
  job j(f, 3, 5);
  j.hello();
  // Rank 2's process dies before its stage answers the config.
  caf::anon_send_exit(j.stages[2], caf::exit_reason::kill);
  f.run();
  REQUIRE(j.control->done());
  const auto outcome = j.control->wait();
  CHECK(outcome.exit_code == 1);
  CHECK_THAT(outcome.error, Catch::Contains("communication with rank 2 failed: its actors are gone"));
  for (const char* agent : {"rank 0 agent: ", "rank 1 agent: ", "rank 2 agent: "}) {
    const auto got = events_of(f.events, agent);
    REQUIRE(got.size() == 1);
    CHECK_THAT(got[0], Catch::StartsWith("abort: rank 0: communication with rank 2 failed"));
  }
  // The surviving stages never started an iteration.
  CHECK(events_of(f.events, "rank 0 stage: ") == std::vector<std::string>{"config"});
}
