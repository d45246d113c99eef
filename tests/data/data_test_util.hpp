// Shared helpers for the data tests: scratch directories and running the Python references.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace mactor::data::test {

/// A fresh directory under the build tree, removed first if it exists. Named per process: ctest
/// runs each test case of one binary as its own process, in parallel, and cases that share a
/// name (the tokenizer references) must not delete each other's files.
inline std::string scratch_dir(const std::string& name) {
  auto p = std::filesystem::path(MACTOR_BINARY_DIR) / "tests" / "data_scratch" / (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

/// The venv's python (falls back to /usr/bin/python3).
inline std::string python() {
  std::string venv = std::string(MACTOR_SOURCE_DIR) + "/.venv/bin/python";
  return std::filesystem::exists(venv) ? venv : "/usr/bin/python3";
}

/// Runs `command`, returning its stdout; throws with the exit status when it fails.
inline std::string run(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + command);
  std::string out;
  char buf[65536];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) throw std::runtime_error("command failed (status " + std::to_string(rc) + "): " + command);
  return out;
}

/// Runs tests/data/megatron_reference.py COMMAND with `spec` and parses its JSON output.
inline nlohmann::json megatron_reference(const std::string& command, const nlohmann::json& spec,
                                         const std::string& dir) {
  const std::string spec_file = dir + "/spec_" + command + ".json";
  std::ofstream(spec_file) << spec.dump();
  return nlohmann::json::parse(run(python() + " " + MACTOR_SOURCE_DIR +
                                   "/tests/data/megatron_reference.py " + command + " " + spec_file));
}

/// Reads a whole file.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace mactor::data::test
