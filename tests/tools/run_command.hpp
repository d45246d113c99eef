// Test utility: runs a shell command with its stdout and stderr captured, and times it.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace mactor::test {

struct run_result {
  int status = -1;  ///< exit code, or 128 + signal
  std::string out, err;
  double seconds = 0;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The build's programs; MACTOR_TEST_BIN_DIR overrides it (scripts/gpu_check.sh on staged binaries).
inline std::string bin_dir() {
  const char* staged = std::getenv("MACTOR_TEST_BIN_DIR");
  return staged && *staged ? std::string(staged) : std::string(MACTOR_BINARY_DIR) + "/bin";
}
inline std::string mactor_bin() { return bin_dir() + "/mactor"; }

/// Runs `sh -c cmd`; stdin is /dev/null unless `stdin_text` is given.
inline run_result run_shell(const std::string& cmd, const std::string& stdin_text = "") {
  char dir_template[] = "/tmp/mactor_run_XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  std::string out = dir + "/out", err = dir + "/err", in = dir + "/in";
  std::ofstream(in) << stdin_text;
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(::open(in.c_str(), O_RDONLY), 0);
    ::dup2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    ::dup2(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  run_result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(out);
  r.err = slurp(err);
  ::unlink(out.c_str());
  ::unlink(err.c_str());
  ::unlink(in.c_str());
  ::rmdir(dir.c_str());
  return r;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  return lines;
}

}  // namespace mactor::test
