// A real 4-rank pretrain_gpt job under `mactor -np 4`, started in the background for the live
// inspector tests: its stdout and stderr go to files in a scratch folder, the inspector's address
// is read from its stderr and its token file is the folder's `token`.
#pragma once

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "run_process.hpp"

namespace mactor::inspector::testing {

// A small 4-stage pipeline: about 50 ms an iteration on a 2-core machine.
inline std::string pipeline_flags(int train_iters) {
  return "--num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 "
         "--micro-batch-size 2 --global-batch-size 16 --lr 1e-3 --mock-data --tokenizer-type NullTokenizer "
         "--vocab-size 8192 --log-interval 1 --eval-iters 1 --pipeline-model-parallel-size 4 --train-iters " +
         std::to_string(train_iters);
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class live_job {
 public:
  /// Starts `mactor -np 4 pretrain_gpt FLAGS` with these extra environment variables.
  live_job(const std::string& name, const std::string& flags, const std::map<std::string, std::string>& env = {})
      : dir_(std::filesystem::path(MACTOR_BINARY_DIR) / "tests/inspector/live" / name) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const std::string command = "exec " + mactor_program() + " -np 4 --oversubscribe " + MACTOR_BINARY_DIR +
                                "/bin/pretrain_gpt " + flags;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::setenv("MACTOR_INSPECT_TOKEN_FILE", (dir_ / "token").c_str(), 1);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      ::dup2(::open((dir_ / "out.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
      ::dup2(::open((dir_ / "err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // The coordinator prints its address once it serves.
    static const std::regex listening(R"(mactor inspector: listening on (\S+) )");
    std::smatch m;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline && !ended()) {
      const std::string e = err();
      if (std::regex_search(e, m, listening)) {
        address_ = m[1].str();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    INFO("job stderr:\n" << err());
    REQUIRE(!address_.empty());
  }
  ~live_job() { kill(); }

  const std::string& address() const { return address_; }
  std::filesystem::path token_file() const { return dir_ / "token"; }
  const std::filesystem::path& dir() const { return dir_; }
  std::string out() const { return read_text(dir_ / "out.txt"); }
  std::string err() const { return read_text(dir_ / "err.txt"); }

  /// `mactor SUBCOMMAND ADDR --token-file TOKEN ARGS`.
  process_result mactor(const std::string& subcommand, const std::string& args = "") const {
    return run_process(mactor_program() + " " + subcommand + " " + address_ + " --token-file '" +
                       token_file().string() + "' " + args);
  }

  /// Runs `mactor inspect --once` until its output matches `pattern` (or `seconds` pass); returns
  /// the last output.
  std::string inspect_until(const std::regex& pattern, double seconds = 30) const {
    std::string last;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = mactor("inspect", "--once --width 200");
      last = r.out + r.err;
      if (r.status == 0 && std::regex_search(r.out, pattern)) return r.out;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return last;
  }

  /// Waits for the job to end by itself; its exit status, or -1 after `seconds`.
  int wait(double seconds = 60) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ended()) return status_;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  /// Ends the job now (the launcher's ranks die with it).
  void kill() {
    if (ended()) return;
    ::kill(-pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    done_ = true;
  }

  /// Whether the job has ended (its status is then kept for wait()).
  bool ended() {
    if (done_) return true;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) != pid_) return false;
    done_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
  }

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  bool done_ = false;
  int status_ = -1;
  std::string address_;
};

}  // namespace mactor::inspector::testing
