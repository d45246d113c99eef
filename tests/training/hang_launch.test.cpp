// Hung ranks end the job (--distributed-timeout-seconds-after-init): a rank SIGSTOPped mid-training
// under `mactor -np N` ends the job within the timeout and a few seconds, exit 18, with the hang
// report naming it; every rank process is gone. A rank stopped in bursts shorter than the timeout
// (slow, but progressing) lets the job finish normally.
#include <catch2/catch.hpp>

#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/training/background_job.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr int hang_status = 18;
const std::string model_flags =
    "--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 "
    "--micro-batch-size 2 --lr 1e-3 --mock-data --tokenizer-type NullTokenizer --vocab-size 8192 "
    "--log-interval 1 --eval-iters 0";

using job = mactor::test::background_job;
using mactor::test::wait_for_training;
using mactor::test::wait_job;
bool alive(pid_t p) { return mactor::test::process_alive(p); }

job start(int ranks, const std::string& flags, const std::string& name) {
  return mactor::test::start_job(ranks, model_flags + " " + flags, "hang_launch", name);
}

// Stops `victim` once training runs and checks how the job ends.
void stop_and_check(int ranks, int victim, const std::string& flags, const std::string& name) {
  constexpr double timeout_s = 4;
  job j = start(ranks, "--train-iters 100000 --distributed-timeout-seconds-after-init 4 " + flags, name);
  const auto pids = wait_for_training(j, ranks, 3);
  REQUIRE(kill(pids[victim], SIGSTOP) == 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  const int status = wait_job(j, 60s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  const std::string err = j.err();
  INFO("stderr:\n" << err);
  WARN(name << ": SIGSTOP to job end " << seconds << " s (timeout " << timeout_s << " s)");
  CHECK(status == hang_status);
  CHECK(seconds >= timeout_s - 0.5);
  CHECK(seconds < timeout_s + 15);
  CHECK(err.find("mactor: hang: rank " + std::to_string(victim) + " ") != std::string::npos);
  // The launcher ends the stopped rank with SIGKILL after its grace period, and says why.
  CHECK(err.find("mactor: rank " + std::to_string(victim) + " (pid " + std::to_string(pids[victim]) +
                 " on localhost) is stopped") != std::string::npos);
  for (pid_t p : pids) CHECK_FALSE(alive(p));
  fs::remove_all(j.dir);
}

}  // namespace

TEST_CASE("hang: a stopped data-parallel rank ends a 2-rank job with exit 18 naming it") {
  stop_and_check(2, 1, "--global-batch-size 4", "dp2");
  // (the report names what rank 1 was last doing: "its stage was last: ...")
}

TEST_CASE("hang: a stopped pipeline rank ends a 4-rank job with exit 18 naming it and its waiting peer") {
  stop_and_check(4, 2, "--global-batch-size 8 --pipeline-model-parallel-size 2", "pp2dp2");
}

TEST_CASE("hang: a stopped rank 0 is found by the other ranks, which end the job with exit 18") {
  constexpr double timeout_s = 4;
  job j = start(2, "--train-iters 100000 --global-batch-size 4 --distributed-timeout-seconds-after-init 4", "rank0");
  const auto pids = wait_for_training(j, 2, 3);
  REQUIRE(kill(pids[0], SIGSTOP) == 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  const int status = wait_job(j, 60s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  const std::string err = j.err();
  INFO("stderr:\n" << err);
  WARN("rank 0 stopped: SIGSTOP to job end " << seconds << " s");
  CHECK(status == hang_status);
  CHECK(seconds < timeout_s + 5 + 15);
  CHECK(err.find("the coordinator on rank 0 has not answered") != std::string::npos);
  for (pid_t p : pids) CHECK_FALSE(alive(p));
  fs::remove_all(j.dir);
}

TEST_CASE("hang: a rank stopped while checkpoints are saved every iteration ends the job with exit 18") {
  const auto save = mactor::test::scratch_dir("hang_launch", "save_ckpt");
  stop_and_check(2, 1, "--global-batch-size 4 --save " + save.string() + " --save-interval 1", "save");
  fs::remove_all(save);
}

TEST_CASE("hang: a rank stopped in bursts shorter than the timeout is slow, not hung, and the job finishes") {
  job j = start(2, "--train-iters 300 --global-batch-size 4 --distributed-timeout-seconds-after-init 5", "slow");
  const auto pids = wait_for_training(j, 2, 2);
  int st = 0, bursts = 0;
  pid_t done = 0;
  // 1.5 s stopped, 0.5 s running, until the job ends (at most 60 bursts).
  while ((done = waitpid(j.mactor, &st, WNOHANG)) == 0 && bursts < 60) {
    kill(pids[1], SIGSTOP);
    std::this_thread::sleep_for(1500ms);
    kill(pids[1], SIGCONT);
    std::this_thread::sleep_for(500ms);
    ++bursts;
  }
  const int status = done == j.mactor ? (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) : wait_job(j, 120s);
  INFO("stderr:\n" << j.err());
  WARN("slow rank: " << bursts << " bursts of 1.5 s stopped");
  CHECK(bursts >= 2);
  CHECK(status == 0);
  CHECK(j.err().find("mactor: hang:") == std::string::npos);
  CHECK(j.out().find(" iteration      300/     300 |") != std::string::npos);
  fs::remove_all(j.dir);
}

TEST_CASE("hang: a timeout that is not positive is refused at start with exit 2 naming the flag") {
  auto r = mactor::test::launch(1, model_flags + " --train-iters 2 --global-batch-size 2 --distributed-timeout-minutes 0", 2);
  CHECK(r.err.find("--distributed-timeout-minutes must be > 0") != std::string::npos);
  r = mactor::test::launch(1, model_flags + " --train-iters 2 --global-batch-size 2 --distributed-timeout-seconds-after-init -3", 2);
  CHECK(r.err.find("--distributed-timeout-seconds-after-init must be > 0") != std::string::npos);
}
