// `mactor inspect` and `mactor swap` run as processes (build/bin/mactor) against an in-process
// server with a fake 4-rank job: what they print and their exit statuses.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

#include "fake_job.hpp"
#include "inspector/server.hpp"
#include "run_process.hpp"

using namespace mactor::inspector;
using mactor::inspector::testing::mactor_program;
using mactor::inspector::testing::run_process;
namespace fs = std::filesystem;

namespace {

std::string token_file_path(const std::string& name) {
  fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests" / "inspector" / "scratch";
  fs::create_directories(dir);
  fs::path p = dir / (name + "_" + std::to_string(::getpid()));
  fs::remove(p);
  return p.string();
}

bool has_line(const std::string& text, const std::string& start, const std::vector<std::string>& parts) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(start, 0) != 0) continue;
    bool all = true;
    for (const auto& p : parts) all &= line.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

server_options with_token_file(const std::string& path) {
  server_options o;
  o.token_file = path;
  return o;
}

}  // namespace

TEST_CASE("mactor inspect --once prints every actor, the per-rank timeline and the stall") {
  const job_snapshot job = testing::fake_job(4, 8);
  const std::string token_file = token_file_path("inspect_once");
  server s([&] { return job; }, nullptr, with_token_file(token_file));
  struct stat st {};
  REQUIRE(::stat(token_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);

  const auto r = run_process(mactor_program() + " inspect " + s.address() + " --token-file " + token_file +
                             " --once --width 100");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("iteration 12 / 100") != std::string::npos);
  for (const auto& a : job.actors)
    CHECK(has_line(r.out, a.kind, {" " + std::to_string(a.rank) + " ", a.activity}));
  CHECK(has_line(r.out, "stage", {"awaiting recv_backward mb 7 chunk 0 from rank 2", "12.4", "1501.0", "3.0 GiB",
                                  "2.0 MiB"}));
  for (int rank = 0; rank < 4; ++rank)
    CHECK(has_line(r.out, "rank " + std::to_string(rank) + " ", {rank == 0 ? "|F0" : "| ", "F0", "B7"}));
  CHECK(has_line(r.out, "rank 3 ", {"F0-B0"}));  // no warmup on the last stage
  CHECK(r.out.find("rank 1 stage waits 12.4 s: awaiting recv_backward mb 7 chunk 0 from rank 2 "
                   "(rank 2 stage is: forward mb 4 chunk 0, for 0.3 s)") != std::string::npos);
  fs::remove(token_file);
}

TEST_CASE("mactor inspect refreshes until stopped, showing each new snapshot") {
  std::atomic<int> calls{0};
  server s([&] {
    job_snapshot job = testing::fake_job(2, 2);
    job.iteration = ++calls;
    return job;
  }, nullptr);
  const auto r = run_process("timeout -s INT 1.5 " + mactor_program() + " inspect " + s.address() +
                             " --token " + s.token() + " --interval 0.2");
  CHECK(r.status == 124);  // still running when timeout stopped it
  CHECK(r.out.find("iteration 1 / 100") != std::string::npos);
  CHECK(r.out.find("iteration 3 / 100") != std::string::npos);
  CHECK(calls >= 3);
}

TEST_CASE("mactor inspect exits 1 naming the address when the job goes away") {
  server s([] { return testing::fake_job(2, 2); }, nullptr);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    s.stop();
  });
  const auto r = run_process("timeout 10 " + mactor_program() + " inspect " + s.address() + " --token " +
                             s.token() + " --interval 0.1");
  stopper.join();
  CHECK(r.status == 1);
  CHECK(r.out.find("iteration 12 / 100") != std::string::npos);
  CHECK(r.err.find("cannot reach the inspector at " + s.address()) != std::string::npos);
}

TEST_CASE("mactor inspect with a wrong token says so and exits 2") {
  server s([] { return testing::fake_job(); }, nullptr);
  std::string wrong = s.token();
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  const auto r = run_process(mactor_program() + " inspect " + s.address() + " --token " + wrong + " --once");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("refused the token (HTTP 403)") != std::string::npos);
  CHECK(r.err.find(s.address()) != std::string::npos);
}

TEST_CASE("mactor inspect names an unreachable address and exits 1") {
  std::string address;
  {
    server gone([] { return job_snapshot{}; }, nullptr);
    address = gone.address();
  }
  const auto r = run_process(mactor_program() + " inspect " + address + " --token abc --once");
  CHECK(r.status == 1);
  CHECK(r.err.find("cannot reach the inspector at " + address) != std::string::npos);
}

TEST_CASE("mactor inspect refuses bad flags with exit status 2") {
  const std::string program = mactor_program();
  auto r = run_process(program + " inspect 127.0.0.1:1 --once");
  CHECK(r.status == 2);
  CHECK(r.err.find("no inspector token") != std::string::npos);
  r = run_process(program + " inspect --token abc");
  CHECK(r.status == 2);
  CHECK(r.err.find("required: ADDR") != std::string::npos);
  r = run_process(program + " inspect localhost --token abc --once");
  CHECK(r.status == 2);
  CHECK(r.err.find("'localhost' is not HOST:PORT") != std::string::npos);
  r = run_process(program + " inspect 127.0.0.1:1 --token abc --interval -1");
  CHECK(r.status == 2);
  CHECK(r.err.find("--interval") != std::string::npos);
  r = run_process(program + " inspect 127.0.0.1:1 --token-file /nonexistent/token");
  CHECK(r.status == 2);
  CHECK(r.err.find("/nonexistent/token") != std::string::npos);
}

TEST_CASE("mactor swap posts the flags after -- and prints the job's answer") {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::vector<std::string>>> calls;
  server s([] { return job_snapshot{}; }, [&](std::string target, std::vector<std::string> flags) {
    std::lock_guard lock(mutex);
    calls.emplace_back(target, flags);
    return swap_result{true, "new " + target + " took over at iteration 9"};
  });
  auto r = run_process(mactor_program() + " swap logger " + s.address() + " --token " + s.token() +
                       " -- --log-interval 5 --timing-log-level 2");
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("new logger took over at iteration 9") != std::string::npos);
  r = run_process(mactor_program() + " swap eval " + s.address() + " --token " + s.token() + " -- --eval-iters 3");
  CHECK(r.status == 0);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].first == "logger");
  CHECK(calls[0].second == std::vector<std::string>{"--log-interval", "5", "--timing-log-level", "2"});
  CHECK(calls[1].first == "eval");
  CHECK(calls[1].second == std::vector<std::string>{"--eval-iters", "3"});
}

TEST_CASE("mactor swap reports a refused swap's message and exits 1") {
  server s([] { return job_snapshot{}; }, [](std::string, std::vector<std::string> flags) {
    return swap_result{false, "new logger failed to start: unknown flag " + flags.at(0) +
                                  "; the old logger keeps running"};
  });
  auto r = run_process(mactor_program() + " swap logger " + s.address() + " --token " + s.token() + " -- --bogus");
  CHECK(r.status == 1);
  CHECK(r.err.find("new logger failed to start: unknown flag --bogus; the old logger keeps running") !=
        std::string::npos);
  r = run_process(mactor_program() + " swap logger " + s.address() + " --token wrong -- --log-interval 5");
  CHECK(r.status == 2);
  CHECK(r.err.find("refused the token") != std::string::npos);
  r = run_process(mactor_program() + " swap checkpointer " + s.address() + " --token " + s.token());
  CHECK(r.status == 2);
  CHECK(r.err.find("invalid choice: 'checkpointer'") != std::string::npos);
}
