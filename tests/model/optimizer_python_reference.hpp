// Runs one of the Python reference scripts in tests/model/ on a JSON input and returns its JSON
// output. The venv's Python is used when present (it has torch and megatron-core).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace mactor::test {

inline std::string reference_python() {
  const std::filesystem::path venv = std::filesystem::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return std::filesystem::exists(venv) ? venv.string() : std::string("/usr/bin/python3");
}

/// Runs `folder`/`script` (relative to the source tree) in `mode` on `input`; returns its output.
inline nlohmann::json run_python_reference(const std::string& script, const std::string& mode,
                                           const nlohmann::json& input, const std::string& folder = "tests/model") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "optim_test_io";
  fs::create_directories(dir);
  const std::string stem = mode + "_" + std::to_string(::getpid());
  const fs::path in = dir / (stem + ".in.json");
  const fs::path out = dir / (stem + ".out.json");
  std::ofstream(in) << input.dump();
  const std::string command = "'" + reference_python() + "' '" + MACTOR_SOURCE_DIR +
                              "/" + folder + "/" + script + "' " + mode + " '" + in.string() + "' '" +
                              out.string() + "'";
  const int status = std::system(command.c_str());
  if (status != 0)
    throw std::runtime_error("reference script failed (status " + std::to_string(status) +
                             "): " + command);
  nlohmann::json result;
  std::ifstream(out) >> result;
  fs::remove(in);
  fs::remove(out);
  return result;
}

/// |a - b| <= rel * max(|a|, |b|) + abs_tol
inline bool close(double a, double b, double rel, double abs_tol = 0.0) {
  return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)) + abs_tol;
}

}  // namespace mactor::test
