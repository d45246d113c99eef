// A `mactor -np N pretrain_gpt` job run in the background, for tests that act on its ranks while it
// trains (SIGSTOP, a controller request): its output files, its ranks' pids, its end.
#pragma once

#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/training/launch_support.hpp"

namespace mactor::test {

struct background_job {
  pid_t mactor = -1;
  std::filesystem::path dir;
  std::string out() const { return slurp((dir / "out").string()); }
  std::string err() const { return slurp((dir / "err").string()); }
};

/// Starts the shell `command` with stdout and stderr in files under scratch_dir(folder, name).
inline background_job start_command(const std::string& command, const std::string& folder, const std::string& name) {
  background_job j;
  j.dir = scratch_dir(folder, name);
  std::filesystem::create_directories(j.dir);
  std::vector<std::string> args = {"/bin/sh", "-c", "exec " + command};
  j.mactor = fork();
  if (j.mactor == 0) {
    setpgid(0, 0);
    dup2(open((j.dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    dup2(open((j.dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return j;
}

/// Starts `mactor -np ranks --oversubscribe pretrain_gpt flags` (start_command).
inline background_job start_job(int ranks, const std::string& flags, const std::string& folder, const std::string& name) {
  return start_command(launch_command(ranks, flags), folder, name);
}

/// The rank's pid: the child of mactor whose environment says RANK=rank (-1: none).
inline pid_t rank_pid(pid_t mactor, int rank) {
  std::ifstream children("/proc/" + std::to_string(mactor) + "/task/" + std::to_string(mactor) + "/children");
  for (pid_t p; children >> p;) {
    std::ifstream env("/proc/" + std::to_string(p) + "/environ");
    std::string var;
    while (std::getline(env, var, '\0'))
      if (var == "RANK=" + std::to_string(rank)) return p;
  }
  return -1;
}

/// True while `p` runs or is stopped (not gone, not a zombie).
inline bool process_alive(pid_t p) {
  if (kill(p, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
  std::string pid, comm, state;
  stat >> pid >> comm >> state;
  return state != "Z";
}

/// How many times `text` occurs in `s`.
inline int occurrences(const std::string& s, const std::string& text) {
  int n = 0;
  for (auto at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
  return n;
}

/// Waits (up to 180 s, or until the job ends) for rank 0 to print `lines` iteration lines; returns
/// every rank's pid.
inline std::vector<pid_t> wait_for_training(const background_job& j, int ranks, int lines) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (occurrences(j.out(), "| lm loss: ") < lines && std::chrono::steady_clock::now() < deadline &&
         process_alive(j.mactor))
    std::this_thread::sleep_for(50ms);
  INFO("stderr:\n" << j.err());
  REQUIRE(occurrences(j.out(), "| lm loss: ") >= lines);
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) pids.push_back(rank_pid(j.mactor, r));
  for (pid_t p : pids) REQUIRE(p > 0);
  return pids;
}

/// mactor's exit status (128 + signal) once it ends, or -1 after `limit` (the job is then killed).
inline int wait_job(const background_job& j, std::chrono::seconds limit) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int st = 0;
  while (waitpid(j.mactor, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-j.mactor, SIGKILL);
      waitpid(j.mactor, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(20ms);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace mactor::test
