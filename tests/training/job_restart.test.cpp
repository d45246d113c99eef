// mactor --max-restarts: a rank killed with SIGKILL mid-training, the job started again by the
// launcher, resumed from its newest checkpoint, and its losses from there on equal to an
// uninterrupted run's, bit for bit.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/training/launch_support.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace mactor::test;

namespace {

// The whole of a rank's or the launcher's output file.
std::string slurp(const fs::path& p) { return mactor::test::slurp(p.string()); }

std::string flags(const fs::path& checkpoints) {
  return "--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 300 --lr 1e-2 "
         "--min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 10 --init-method-std 0.1 --mock-data "
         "--tokenizer-type NullTokenizer --vocab-size 8191 --log-interval 1 --eval-iters 0 --seed 5 "
         "--save-interval 20 --save " + checkpoints.string() + " --load " + checkpoints.string();
}

// Each iteration's last logged "lm loss" text (a restarted job logs the iterations after its
// checkpoint again).
std::map<int, std::string> losses_by_iteration(const std::string& log) {
  std::map<int, std::string> out;
  static const std::regex line(R"(iteration +(\d+)/ +\d+ \|.*?\| lm loss: ([-+0-9.eE]+) \|)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1].str())] = (*it)[2].str();
  return out;
}

// The processes whose parent is `parent` (the launcher's ranks).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> kids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) kids.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return kids;
}

}  // namespace

TEST_CASE("mactor max-restarts starts a job again after a rank is killed and it resumes from its checkpoint") {
  const fs::path dir = scratch_dir("job_restart", "kill");
  fs::create_directories(dir);
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference")).out);
  REQUIRE(reference.size() == 300);

  const pid_t launcher = fork();
  if (launcher == 0) {
    freopen((dir / "out.txt").c_str(), "w", stdout);
    freopen((dir / "err.txt").c_str(), "w", stderr);
    const std::string line = mactor_bin() + " -np 2 --oversubscribe --max-restarts 1 " + bin_dir() + "/pretrain_gpt " +
                             flags(dir / "restarted");
    execl("/bin/sh", "sh", "-c", ("exec " + line).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Past the checkpoint of iteration 40, kill one rank.
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (losses_by_iteration(slurp(dir / "out.txt")).count(45) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  const auto before = losses_by_iteration(slurp(dir / "out.txt"));
  REQUIRE(before.count(45) == 1);
  REQUIRE(before.count(300) == 0);  // still training
  const auto ranks = children_of(launcher);
  REQUIRE(ranks.size() == 2);
  REQUIRE(kill(ranks[1], SIGKILL) == 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const std::size_t logged_before = slurp(dir / "out.txt").size();
  // Recovery time: from the kill to the restarted job's first iteration line.
  double recovered_s = -1;
  while (recovered_s < 0 && std::chrono::steady_clock::now() < killed_at + 120s) {
    if (slurp(dir / "out.txt").find("successfully loaded checkpoint", logged_before) != std::string::npos &&
        std::regex_search(slurp(dir / "out.txt").substr(logged_before), std::regex(R"(iteration +\d+/ +300 \|)")))
      recovered_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
    std::this_thread::sleep_for(10ms);
  }
  int status = 0;
  REQUIRE(waitpid(launcher, &status, 0) == launcher);
  const std::string out = slurp(dir / "out.txt"), err = slurp(dir / "err.txt");
  INFO("stderr:\n" << err.substr(err.size() > 4000 ? err.size() - 4000 : 0));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(err.find("mactor: the job failed (exit status") != std::string::npos);
  CHECK(err.find("starting it again (restart 1 of 1)") != std::string::npos);
  // The second start resumed from a checkpoint (not from scratch) and finished the run.
  static const std::regex resumed(R"(successfully loaded checkpoint from .* at iteration (\d+))");
  std::smatch m;
  REQUIRE(std::regex_search(out, m, resumed));
  const int from = std::stoi(m[1].str());
  CHECK(from >= 40);
  std::printf("killed a rank after iteration %d; restarted from the checkpoint of iteration %d; the first iteration "
              "after it logged %.2f s after the kill\n", before.rbegin()->first, from, recovered_s);
  const auto after = losses_by_iteration(out);
  REQUIRE(after.size() == 300);
  for (int i = 1; i <= 300; ++i) {
    INFO("iteration " << i << " (resumed after " << from << ")");
    CHECK(after.at(i) == reference.at(i));
  }
  fs::remove_all(dir);
}
