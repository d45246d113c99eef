// Helpers of the restart tests (job_restart.test.cpp, in_job_restart.test.cpp): a 2-rank job of a
// tiny GPT under mactor with a rank killed or stopped mid-training, what the launcher and the
// ranks did about it, and the checks that the losses carried on as an uninterrupted run's.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "checkpoint/local_checkpoint.hpp"
#include "tests/training/launch_support.hpp"

namespace mactor::test::restart {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The whole of a rank's or the launcher's output file.
inline std::string slurp(const fs::path& p) { return mactor::test::slurp(p.string()); }

inline std::string flags(const fs::path& checkpoints, const std::string& saves) {
  return "--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 300 --lr 1e-2 "
         "--min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 10 --init-method-std 0.1 --mock-data "
         "--tokenizer-type NullTokenizer --vocab-size 8191 --log-interval 1 --eval-iters 0 --seed 5 "
         "--save " + checkpoints.string() + " --load " + checkpoints.string() + saves;
}

// Each iteration's last logged "lm loss" text (a restarted job logs the iterations after its
// checkpoint again).
inline std::map<int, std::string> losses_by_iteration(const std::string& log) {
  std::map<int, std::string> out;
  static const std::regex line(R"(iteration +(\d+)/ +\d+ \|.*?\| lm loss: ([-+0-9.eE]+) \|)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1].str())] = (*it)[2].str();
  return out;
}

// The processes whose parent is `parent` (the launcher's ranks).
inline std::vector<pid_t> children_of(pid_t parent) {
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

// The launcher's ranks: its children, or for a rank on another host (through an agent that
// execs `mactor --remote-exec`) the supervisor's child.
inline std::vector<pid_t> rank_processes(pid_t launcher) {
  std::vector<pid_t> ranks;
  for (pid_t p : children_of(launcher)) {
    std::ifstream comm("/proc/" + std::to_string(p) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name != "mactor") {
      ranks.push_back(p);
      continue;
    }
    for (pid_t rank : children_of(p)) ranks.push_back(rank);
  }
  return ranks;
}

// What a killed and restarted job did.
struct restarted_job {
  int status = -1, killed_after = 0, resumed_from = -1;
  std::vector<pid_t> ranks_before, ranks_after;  // the launcher's children before the kill and once recovered
  double recovered_s = -1;  // from the kill to the restarted job's first iteration line
  std::string out, err;
};

// Runs `flags` on 2 ranks under mactor with `launcher_flags`, sends rank 1 `sig` (SIGKILL) once
// iteration 45 is logged (then calls `after_kill`), and waits for the job's end. `processes`: the
// launcher's, spares included (-np is 2 unless the launcher flags say otherwise).
inline restarted_job kill_and_restart(const fs::path& dir, const std::string& launcher_flags, const std::string& job_flags,
                               const std::function<void()>& after_kill, int sig = SIGKILL, std::size_t processes = 2) {
  restarted_job job;
  const pid_t launcher = fork();
  if (launcher == 0) {
    freopen((dir / "out.txt").c_str(), "w", stdout);
    freopen((dir / "err.txt").c_str(), "w", stderr);
    // Its own home: the inspector's token files land in <dir>/home/.mactor/inspector.
    setenv("HOME", (dir / "home").c_str(), 1);
    const std::string np = launcher_flags.find("-np ") == std::string::npos ? " -np 2" : "";
    const std::string line = mactor_bin() + np + " --oversubscribe " + launcher_flags + " " + bin_dir() + "/pretrain_gpt " + job_flags;
    execl("/bin/sh", "sh", "-c", ("exec " + line).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (losses_by_iteration(slurp(dir / "out.txt")).count(45) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  const auto before = losses_by_iteration(slurp(dir / "out.txt"));
  REQUIRE(before.count(45) == 1);
  REQUIRE(before.count(300) == 0);  // still training
  job.killed_after = before.rbegin()->first;
  const auto ranks = rank_processes(launcher);
  REQUIRE(ranks.size() == processes);
  job.ranks_before = ranks;
  REQUIRE(kill(ranks[1], sig) == 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const std::size_t logged_before = slurp(dir / "out.txt").size();
  after_kill();
  while (job.recovered_s < 0 && std::chrono::steady_clock::now() < killed_at + 120s) {
    const auto out = slurp(dir / "out.txt");
    if (out.find("successfully loaded checkpoint", logged_before) != std::string::npos &&
        std::regex_search(out.substr(logged_before), std::regex(R"(iteration +\d+/ +300 \|)"))) {
      job.recovered_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
      job.ranks_after = rank_processes(launcher);
    }
    std::this_thread::sleep_for(10ms);
  }
  int status = 0;
  REQUIRE(waitpid(launcher, &status, 0) == launcher);
  REQUIRE(WIFEXITED(status));
  job.status = WEXITSTATUS(status);
  job.out = slurp(dir / "out.txt");
  job.err = slurp(dir / "err.txt");
  static const std::regex resumed(R"(successfully loaded checkpoint from .* at iteration (\d+))");
  std::smatch m;
  if (std::regex_search(job.out, m, resumed)) job.resumed_from = std::stoi(m[1].str());
  return job;
}

// The restarted job ended well, resumed from `at_least` or later, and logged every loss as the
// uninterrupted run did.
inline void check_recovered(const restarted_job& job, const std::map<int, std::string>& reference, int at_least,
                     const std::vector<std::string>& launcher_lines) {
  INFO("stderr:\n" << job.err.substr(job.err.size() > 4000 ? job.err.size() - 4000 : 0));
  CHECK(job.status == 0);
  for (const auto& line : launcher_lines) {
    INFO(line);
    CHECK(job.err.find(line) != std::string::npos);
  }
  REQUIRE(job.resumed_from >= at_least);
  const auto after = losses_by_iteration(job.out);
  REQUIRE(after.size() == 300);
  for (int i = 1; i <= 300; ++i) {
    INFO("iteration " << i << " (resumed after " << job.resumed_from << ")");
    CHECK(after.at(i) == reference.at(i));
  }
}

// The inspector token files a job left in its home (kill_and_restart's <dir>/home): none once it
// ended, a rank restarted in place included (its image is replaced without its exit path).
inline std::vector<std::string> token_files_left(const fs::path& dir) {
  std::vector<std::string> left;
  const fs::path tokens = dir / "home/.mactor/inspector";
  if (fs::exists(tokens))
    for (const auto& e : fs::directory_iterator(tokens)) left.push_back(e.path().filename().string());
  return left;
}

// A fresh folder in the node's memory (tmpfs, as a node's /dev/shm), for local checkpoints.
inline fs::path node_memory(const fs::path& dir, const std::string& name) {
  const fs::path memory = fs::exists("/dev/shm") ? fs::path("/dev/shm") / ("mactor_" + name + "_" + std::to_string(getpid()))
                                                 : dir / "local";
  fs::remove_all(memory);
  return memory;
}

// Local checkpoints every 10 iterations in `memory`, each copied to the other rank (--replication).
inline std::string replicated_in_memory(const fs::path& memory) {
  return " --save-interval 1000 --non-persistent-save-interval 10 --non-persistent-ckpt-type local "
         "--non-persistent-local-ckpt-dir " + memory.string() + " --replication --replication-jump 1";
}

inline const std::vector<std::string> whole_job_restart = {"mactor: the job failed (exit status",
                                                     "starting it again (restart 1 of 1)"};


}  // namespace mactor::test::restart
