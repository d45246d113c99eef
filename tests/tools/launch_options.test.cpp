// mpirun-style command lines: one-dash long options, '=' forms, ':' contexts, stop at the program.
#include <catch2/catch.hpp>

#include "tools/launcher/in_job_restart.hpp"
#include "tools/launcher/launch_options.hpp"

using namespace mactor::tools;

namespace {
launch_options parse(std::vector<std::string> words) {
  words.insert(words.begin(), "mactor");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  return parse_launch_options(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST_CASE("options stop at the program, whose own dashes stay its arguments") {
  auto o = parse({"-np", "4", "--tag-output", "prog", "-np", "9", "--lr=1"});
  REQUIRE(o.contexts.size() == 1);
  CHECK(o.contexts[0].np == 4);
  CHECK(o.tag_output);
  CHECK(o.contexts[0].argv == std::vector<std::string>{"prog", "-np", "9", "--lr=1"});
}

TEST_CASE("one-dash, two-dash and '=' spellings mean the same option") {
  for (auto words : {std::vector<std::string>{"-host", "a:2", "-npernode", "2", "p"},
                     std::vector<std::string>{"--host=a:2", "--npernode=2", "p"},
                     std::vector<std::string>{"-H", "a:2", "-N", "2", "p"}}) {
    auto o = parse(words);
    CHECK(o.host_lists == std::vector<std::string>{"a:2"});
    CHECK(o.npernode == 2);
  }
}

TEST_CASE("':' starts a new program with its own rank count and -x") {
  auto o = parse({"-np", "1", "-x", "A=1", "p", "x", ":", "-n", "3", "-x", "B", "q"});
  REQUIRE(o.contexts.size() == 2);
  CHECK(o.contexts[0].np == 1);
  CHECK(o.contexts[0].argv == std::vector<std::string>{"p", "x"});
  CHECK(o.contexts[0].env[0].second == std::optional<std::string>("1"));
  CHECK(o.contexts[1].np == 3);
  CHECK(o.contexts[1].env[0].first == "B");
  CHECK_FALSE(o.contexts[1].env[0].second.has_value());
}

TEST_CASE("map-by ppr:N:node sets ranks per node and its oversubscribe modifier allows more than slots") {
  auto o = parse({"--map-by", "ppr:3:node,oversubscribe", "p"});
  CHECK(o.npernode == 3);
  CHECK(o.oversubscribe);
}

TEST_CASE("the rsh agent comes from --launch-agent, --mca plm_rsh_agent, or ssh") {
  CHECK(parse({"--launch-agent", "ip netns exec", "p"}).rsh_agent ==
        std::vector<std::string>{"ip", "netns", "exec"});
  CHECK(parse({"--mca", "plm_rsh_agent", "rsh -x", "p"}).rsh_agent ==
        std::vector<std::string>{"rsh", "-x"});
  ::unsetenv("OMPI_MCA_plm_rsh_agent");
  CHECK(parse({"p"}).rsh_agent == std::vector<std::string>{"ssh"});
}

TEST_CASE("bad options are refused with the option named") {
  CHECK_THROWS_WITH(parse({"-np", "x", "p"}), Catch::Contains("-np x"));
  CHECK_THROWS_WITH(parse({"--timeout", "-1", "p"}), Catch::Contains("--timeout -1"));
  CHECK_THROWS_WITH(parse({"--max-restarts", "-1", "p"}), Catch::Contains("--max-restarts -1"));
  CHECK(parse({"--max-restarts", "3", "p"}).max_restarts == 3);
  CHECK_THROWS_WITH(parse({"--device-memory", "12X", "p"}), Catch::Contains("--device-memory 12X is not a memory size"));
  CHECK_THROWS_WITH(parse({"--device-memory", "-1G", "p"}), Catch::Contains("--device-memory -1G"));
  CHECK(parse({"--device-memory=1.5G", "p"}).device_memory == "1.5G");
  CHECK_THROWS_WITH(parse({"--bogus", "p"}), Catch::Contains("--bogus"));
  CHECK_THROWS_WITH(parse({"-np", "2", "p", ":"}), Catch::Contains("no program"));
  CHECK_THROWS_WITH(parse({"--mca", "btl", "tcp", "p"}), Catch::Contains("btl"));
  CHECK_THROWS_WITH(parse({"--tag-output=1", "p"}), Catch::Contains("takes no value"));
}

TEST_CASE("in-job restart is read from the program's own --inprocess-* arguments") {
  const auto off = in_job_restart_from({"pretrain_gpt", "--lr", "1", "--inprocess-max-iterations", "3"});
  CHECK_FALSE(off.enabled);
  const auto on = in_job_restart_from({"pretrain_gpt", "--inprocess-restart", "--inprocess-max-iterations", "3",
                                       "--inprocess-hard-timeout=12.5"});
  CHECK(on.enabled);
  CHECK(on.max_restarts == 3);
  CHECK(on.hard_timeout_s == 12.5);
  const auto defaults = in_job_restart_from({"pretrain_gpt", "--inprocess-restart"});
  CHECK(defaults.max_restarts == -1);  // Megatron's None: no limit
  CHECK(defaults.hard_timeout_s == 90);
  CHECK_THROWS_WITH(in_job_restart_from({"p", "--inprocess-restart", "--inprocess-max-iterations", "-1"}),
                    Catch::Contains("must be a non-negative integer"));
  CHECK_THROWS_WITH(in_job_restart_from({"p", "--inprocess-hard-timeout", "soon"}), Catch::Contains("positive number"));
}
