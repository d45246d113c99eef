// Forks one child process per rank for the UCX tests; children report through exit codes
// and files in a shared temporary directory, never through Catch2 (its state dies with them).
#pragma once

#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace mactor::comm::testing {

/// A fresh directory under the system temp dir, removed on destruction.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mactor_comm_XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path / name);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
};

/// Forks `world` children running body(rank); returns their pids.
inline std::vector<pid_t> spawn_ranks(int world, const std::function<int(int)>& body) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 99;
      try {
        code = body(r);
      } catch (...) {
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  return pids;
}

/// Waits for `pid` up to `timeout`; kills it on timeout and returns -1, else its exit code.
inline int wait_rank(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace mactor::comm::testing
