// A rank that dies mid-training, with no launcher to tear the job down (two processes started with
// torchrun's variables): the survivor ends within 10 s with an error naming the dead rank, whether
// the dead rank is a data-parallel peer, a pipeline neighbour, or rank 0 with the coordinator.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/tools/run_command.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// The whole of a rank's or the launcher's output file.
std::string slurp(const fs::path& p) { return mactor::test::slurp(p.string()); }

pid_t start_rank(int rank, int port, const fs::path& dir, const std::vector<std::string>& extra) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const std::string r = std::to_string(rank);
  setenv("RANK", r.c_str(), 1);
  setenv("LOCAL_RANK", r.c_str(), 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("TORCHELASTIC_RUN_ID", ("rank_failure_" + std::to_string(port)).c_str(), 1);
  freopen((dir / ("rank" + r + ".out")).c_str(), "w", stdout);
  freopen((dir / ("rank" + r + ".err")).c_str(), "w", stderr);
  const std::string program = mactor::test::bin_dir() + "/pretrain_gpt";
  std::vector<std::string> args = {program, "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
                                   "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
                                   "--global-batch-size", "4", "--train-iters", "100000", "--lr", "1e-3", "--mock-data",
                                   "--tokenizer-type", "NullTokenizer", "--vocab-size", "8192", "--log-interval", "1",
                                   "--eval-iters", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(program.c_str(), argv.data());
  _exit(127);
}

// Starts two ranks, kills `victim` once training is under way, and checks how the other one ends.
void kill_and_check(int victim, const std::vector<std::string>& extra, const std::string& tag) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/rank_failure" / tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int port = 20000 + static_cast<int>((getpid() * 7 + victim * 131 + static_cast<int>(tag.size())) % 20000);
  const pid_t ranks[2] = {start_rank(0, port, dir, extra), start_rank(1, port, dir, extra)};
  const int survivor = 1 - victim;

  // Rank 0's logger prints the log lines: wait until training is under way.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (slurp(dir / "rank0.out").find("| lm loss: ") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  REQUIRE(slurp(dir / "rank0.out").find("| lm loss: ") != std::string::npos);

  REQUIRE(kill(ranks[victim], SIGKILL) == 0);
  const auto killed_at = std::chrono::steady_clock::now();
  int status = 0;
  waitpid(ranks[victim], &status, 0);
  pid_t done = 0;
  while ((done = waitpid(ranks[survivor], &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() - killed_at < 10s)
    std::this_thread::sleep_for(20ms);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  if (done == 0) {
    kill(ranks[survivor], SIGKILL);
    waitpid(ranks[survivor], &status, 0);
  }
  const auto err = slurp(dir / ("rank" + std::to_string(survivor) + ".err"));
  INFO("rank " << survivor << " stderr:\n" << err);
  REQUIRE(done == ranks[survivor]);  // it ended by itself within 10 s
  std::printf("%s: rank %d ended %.2f s after rank %d was killed\n", tag.c_str(), survivor, seconds, victim);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(err.find("rank " + std::to_string(survivor) + ": communication with rank " + std::to_string(victim) + " failed") !=
        std::string::npos);
}

}  // namespace

TEST_CASE("a data-parallel rank killed mid-training ends the survivor within 10 s, naming the rank") {
  kill_and_check(1, {}, "data_parallel");
}

TEST_CASE("a pipeline stage killed mid-iteration ends the other stage within 10 s, naming the rank") {
  kill_and_check(1, {"--pipeline-model-parallel-size", "2"}, "pipeline");
}

TEST_CASE("rank 0 killed mid-training (the coordinator) ends the other rank within 10 s, naming rank 0") {
  kill_and_check(0, {"--pipeline-model-parallel-size", "2"}, "coordinator");
}
