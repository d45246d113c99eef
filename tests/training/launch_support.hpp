// Launching pretrain_gpt alone or under `mactor -np N` and reading the losses it logs, for the
// layout-invariance tests.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/tools/run_command.hpp"

namespace mactor::test {

/// Runs `command` and expects bad input's answer: exit status 2, no training, and stderr naming
/// every one of `named`.
inline void expect_user_error(const std::string& command, std::initializer_list<std::string> named) {
  const auto r = run_shell(command);
  INFO(command << "\nexit status " << r.status << "\nstderr:\n" << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.find("iteration ") == std::string::npos);
  for (const auto& word : named) {
    INFO("the error should name: " << word);
    CHECK(r.err.find(word) != std::string::npos);
  }
}

// Every "lm loss: X" of the iteration lines, and every "lm loss value: X" of the validation blocks.
struct logged_losses {
  std::vector<double> train, validation;
};

inline logged_losses parse_losses(const std::string& log) {
  logged_losses l;
  static const std::regex train(R"(\| lm loss: ([-+0-9.eE]+) \|)");
  static const std::regex valid(R"(\| lm loss value: ([-+0-9.eE]+) \|)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), train); it != std::sregex_iterator(); ++it)
    l.train.push_back(std::stod((*it)[1].str()));
  for (auto it = std::sregex_iterator(log.begin(), log.end(), valid); it != std::sregex_iterator(); ++it)
    l.validation.push_back(std::stod((*it)[1].str()));
  return l;
}

/// pretrain_gpt (or `program`) alone, or under `mactor -np ranks --oversubscribe` (-np 4 on a
/// 2-core machine).
inline std::string launch_command(int ranks, const std::string& flags, const std::string& program_name = "pretrain_gpt") {
  const std::string program = bin_dir() + "/" + program_name;
  return ranks == 1 ? program + " " + flags
                    : mactor_bin() + " -np " + std::to_string(ranks) + " --oversubscribe " + program + " " + flags;
}

/// Runs launch_command and requires its exit status; the output tail goes with a failure.
inline run_result launch(int ranks, const std::string& flags, int want_status = 0,
                         const std::string& program = "pretrain_gpt") {
  const auto command = launch_command(ranks, flags, program);
  auto r = run_shell(command);
  INFO(command << "\nstdout tail:\n" << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0) << "\nstderr:\n" << r.err);
  REQUIRE(r.status == want_status);
  return r;
}

/// A fresh folder <build>/tests/training/<folder>/<name>_<pid> (removed if present; its parent made).
inline std::filesystem::path scratch_dir(const std::string& folder, const std::string& name) {
  const auto dir = std::filesystem::path(MACTOR_BINARY_DIR) / "tests/training" / folder / (name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir.parent_path());
  return dir;
}

/// Every value the log lines give a field, in order ("| key: VALUE |": z_loss, grad norm, ...).
inline std::vector<double> logged_values(const std::string& log, const std::string& key) {
  std::vector<double> v;
  const std::regex entry("\\| " + key + ": ([-+0-9.eE]+) \\|");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), entry); it != std::sregex_iterator(); ++it)
    v.push_back(std::stod((*it)[1].str()));
  return v;
}

/// The iteration lines' numbers (timestamps and timings removed) by iteration number.
inline std::map<int, std::string> iteration_lines(const std::string& log) {
  static const std::regex line(R"(iteration +(\d+)/ +\d+ \| consumed samples: +\d+ \|(?: skipped samples: +\d+ \|)? elapsed time per iteration \(ms\): [0-9.]+ \| (.*))");
  std::map<int, std::string> out;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1].str())] = (*it)[2].str();
  return out;
}

inline logged_losses run_job(int ranks, const std::string& flags, std::size_t evaluations = 4,
                             std::size_t iterations = 6, const std::string& program = "pretrain_gpt") {
  const std::string command = launch_command(ranks, flags, program);
  const auto r = run_shell(command);
  INFO(command << "\nstdout tail:\n"
               << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0) << "\nstderr:\n"
               << r.err);
  REQUIRE(r.status == 0);
  auto l = parse_losses(r.out);
  REQUIRE(l.train.size() == iterations);
  // The validation blocks during training, then the final validation (and test) evaluations.
  REQUIRE(l.validation.size() == evaluations);
  return l;
}

inline void check_same(const std::vector<double>& got, const std::vector<double>& want, const char* what, int ranks,
                       double tolerance = 1e-5) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double rel = std::abs(got[i] - want[i]) / std::abs(want[i]);
    INFO(what << " " << i << " with " << ranks << " ranks: " << got[i] << " vs " << want[i] << " alone");
    CHECK(rel <= tolerance);
    worst = std::max(worst, rel);
  }
  std::printf("%s with %d ranks vs 1: max relative difference %.3g\n", what, ranks, worst);
}

/// Runs `flags + layout` on `ranks` processes and checks its training and validation losses
/// against `one`, the same flags' one-process run (which must have moved).
inline void check_layout_against(const logged_losses& one, int ranks, const std::string& flags, const std::string& layout,
                                 std::size_t evaluations, std::size_t iterations,
                                 const std::string& program = "pretrain_gpt", double tolerance = 1e-5) {
  INFO("layout: " << layout);
  REQUIRE(one.train.front() != one.train.back());  // training must move for the comparison to mean anything
  const auto spread = run_job(ranks, flags + " " + layout, evaluations, iterations, program);
  check_same(spread.train, one.train, ("lm loss, " + layout).c_str(), ranks, tolerance);
  check_same(spread.validation, one.validation, ("validation/test lm loss, " + layout).c_str(), ranks, tolerance);
}

}  // namespace mactor::test
