// The config message: identical after CAF serialization, and after a trip to another process over the middleman.
#include <catch2/catch.hpp>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <csignal>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

#include "../config/random_config.hpp"
#include "actors/config_message.hpp"
#include "actors/inspect.hpp"
#include "actors/type_ids.hpp"
#include "config/config_json.hpp"

using namespace mactor;
using config::testing::random_config;
using config::testing::same_config;

namespace {

caf::actor_system_config& system_config() {
  static caf::actor_system_config cfg = [] {
    caf::actor_system_config c;
    c.load<caf::io::middleman>();
    actors::register_message_types(c);
    return c;
  }();
  return cfg;
}

// A child process running config_echo, with pipes to its stdin and stdout.
struct echo_process {
  pid_t pid = -1;
  int to_child = -1;
  unsigned port = 0;

  echo_process() {
    int in[2], out[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      const std::string exe = std::string(MACTOR_BINARY_DIR) + "/bin/actors_config_echo";
      execl(exe.c_str(), exe.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child = in[1];
    FILE* f = fdopen(out[0], "r");
    REQUIRE(std::fscanf(f, "%u", &port) == 1);
    std::fclose(f);
  }

  ~echo_process() {
    close(to_child);  // the child exits when its stdin closes
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

}  // namespace

TEST_CASE("randomized configs are identical after CAF's binary serialization") {
  caf::actor_system sys{system_config()};
  std::mt19937_64 rng(11);
  for (int round = 0; round < 25; ++round) {
    actors::config_message sent{random_config(rng, round)};
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    REQUIRE_FALSE(sink(sent));
    actors::config_message got;
    caf::binary_deserializer source{sys, buf};
    REQUIRE_FALSE(source(got));
    CHECK(same_config(sent.args, got.args));
    CHECK(config::to_json(got.args) == config::to_json(sent.args));
  }
}

TEST_CASE("a config message sent to another process over the middleman arrives intact") {
  echo_process child;
  REQUIRE(child.port > 0);
  caf::actor_system sys{system_config()};
  auto remote = sys.middleman().remote_actor("127.0.0.1", static_cast<uint16_t>(child.port));
  REQUIRE(remote);
  caf::scoped_actor self{sys};
  std::mt19937_64 rng(5);
  for (int round = 0; round < 5; ++round) {
    actors::config_message sent{random_config(rng, round)};
    bool answered = false;
    self->request(*remote, std::chrono::seconds(20), sent)
        .receive([&](actors::config_message& back) {
                   answered = true;
                   CHECK(same_config(sent.args, back.args));
                 },
                 [&](caf::error& e) { FAIL("no answer: " << sys.render(e)); });
    CHECK(answered);
  }
}
