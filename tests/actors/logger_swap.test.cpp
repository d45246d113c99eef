// The logger's hot swap, twice in a row, in a real (threaded) actor system: the job's end must
// wait for the newest logger, which prints the records held back until its takeover. Before the
// fix the chain was kept in CAF's registry, whose put ignores a second actor under the same name,
// so the third logger was never waited for and a job could end before its last lines.
#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "actors/type_ids.hpp"
#include "config/config_json.hpp"
#include "config/parser.hpp"

using namespace mactor;

namespace {

config::megatron_args logger_args() {
  const std::vector<std::string> flags{"--num-layers", "2", "--hidden-size", "8", "--num-attention-heads", "2",
                                       "--seq-length", "8", "--max-position-embeddings", "8", "--micro-batch-size",
                                       "1", "--train-iters", "4", "--lr", "1e-3", "--mock-data", "--tokenizer-type",
                                       "NullTokenizer", "--vocab-size", "64"};
  return config::parse_command_line(flags, "pretrain_gpt").args;
}

// The coordinator's side of a swap (inspection_swap.cpp): ask the current logger for its
// successor, then send it the handover after the last record it is sent.
caf::actor swap(caf::scoped_actor& self, const caf::actor& current, const std::string& args_json) {
  caf::actor successor;
  self->request(current, caf::infinite, actors::logger_successor_request{args_json})
      .receive(
          [&](bool ok, std::string& message, caf::actor& next) {
            INFO(message);
            REQUIRE(ok);
            successor = next;
          },
          [&](caf::error& e) { FAIL("the logger did not answer: " << to_string(e)); });
  self->send(current, actors::logger_handover{successor});
  return successor;
}

std::string read_text(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

}  // namespace

TEST_CASE("after two logger swaps the job's end waits for the newest logger and every line is out") {
  caf::actor_system_config cfg;
  actors::register_message_types(cfg);
  caf::actor_system sys{cfg};
  std::FILE* out = std::tmpfile();
  REQUIRE(out);
  const auto args = logger_args();
  const std::string json = config::to_json(args, -1);
  const auto first = actors::spawn_logger(sys, args, out, 1, 64);
  caf::scoped_actor coordinator{sys};
  coordinator->send(first, actors::log_line{"line 1", false, {}});
  const auto second = swap(coordinator, first, json);
  CHECK(actors::current_logger(sys, first) == second);
  coordinator->send(second, actors::log_line{"line 2", false, {}});
  const auto third = swap(coordinator, second, json);
  CHECK(actors::current_logger(sys, first) == third);  // the registry kept `second` here
  // Many records held back by the third logger until the second hands over, then the stop.
  for (int i = 3; i <= 2000; ++i) coordinator->send(third, actors::log_line{"line " + std::to_string(i), false, {}});
  coordinator->send(third, actors::stop_message{});

  actors::wait_for_loggers(sys, first);
  const std::string text = read_text(out);
  std::istringstream lines(text);
  int expected = 1;
  for (std::string line; std::getline(lines, line); ++expected) REQUIRE(line == "line " + std::to_string(expected));
  CHECK(expected == 2001);
  std::fclose(out);
}
