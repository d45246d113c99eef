// Runs a shell command for the inspector tests and collects its exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace mactor::inspector::testing {

struct process_result {
  int status = -1;  ///< exit status, or 128 + signal
  std::string out, err;
};

inline process_result run_process(const std::string& command) {
  static int counter = 0;
  const std::string err_file =
      std::string(MACTOR_BINARY_DIR) + "/tests/inspector/stderr_" + std::to_string(::getpid()) + "_" +
      std::to_string(counter++) + ".txt";
  process_result r;
  FILE* pipe = ::popen((command + " 2>" + err_file).c_str(), "r");
  if (!pipe) return r;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  std::ifstream in(err_file);
  std::stringstream text;
  text << in.rdbuf();
  r.err = text.str();
  std::remove(err_file.c_str());
  return r;
}

inline std::string mactor_program() { return std::string(MACTOR_BINARY_DIR) + "/bin/mactor"; }

}  // namespace mactor::inspector::testing
