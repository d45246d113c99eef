// training/result_validation against Megatron-Core's own RerunStateMachine (rerun_reference.py
// runs it from the venv on scripted losses): the same decisions (reruns, checkpoint, exit code),
// the same log lines and the same --result-rejected-tracker-filename lines, scenario by scenario.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/python_text.hpp"
#include "training/result_validation.hpp"

using namespace mactor::training;
namespace fs = std::filesystem;

namespace {

struct scenario {
  std::string name, mode, type;
  std::int64_t rate = 0;
  bool spiky = false;
  std::vector<std::pair<std::vector<double>, std::vector<double>>> iterations;  // initial run, rerun
  std::vector<std::string> events, logs, tracker;                               // Megatron's
};

std::vector<double> parse_losses(std::istringstream& in) {
  std::vector<double> v;
  std::string word;
  while (in >> word && word != "|") v.push_back(word == "nan" ? NAN : word == "inf" ? INFINITY : std::stod(word));
  return v;
}

std::vector<scenario> read_scenarios(const fs::path& file) {
  std::vector<scenario> all;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const std::string rest = line.size() > 2 ? line.substr(2) : "";
    if (line[0] == 'S') {
      all.emplace_back();
      std::istringstream words(rest);
      int spiky = 0;
      words >> all.back().name >> all.back().mode >> all.back().rate >> all.back().type >> spiky;
      all.back().spiky = spiky != 0;
    } else if (line[0] == 'I') {
      std::istringstream words(rest);
      auto initial = parse_losses(words);
      all.back().iterations.emplace_back(std::move(initial), parse_losses(words));
    } else if (line[0] == 'E') {
      all.back().events.push_back(rest);
    } else if (line[0] == 'L') {
      all.back().logs.push_back(rest);
    } else if (line[0] == 'T') {
      all.back().tracker.push_back(rest);
    }
  }
  return all;
}

std::string bool_text(bool b) { return b ? "1" : "0"; }

// The scenario on mactor's machine, as rank_worker drives it (one rank: the agreement is the flag).
scenario replay(const scenario& s, const fs::path& tracker) {
  fs::remove(tracker);
  rerun_options o;
  o.mode = s.mode == "disabled" ? rerun_mode::disabled : rerun_mode::validate_results;
  o.error_injection_rate = s.rate;
  o.error_injection_type = s.type == "correct_result"     ? rerun_diagnostic::correct_result
                           : s.type == "persistent_error" ? rerun_diagnostic::persistent_error
                                                          : rerun_diagnostic::transient_error;
  o.tracker_filename = tracker.string();
  o.logs_for_job = true;
  scenario got;
  result_validation m(o, [&](const std::string& level, const std::string& text) {
    got.logs.push_back(level + ":megatron.core.rerun_state_machine:" + text);
  });
  const auto agree = [](int flag) { return flag; };
  for (const auto& [initial, rerun] : s.iterations) {
    int pass = 0;
    try {
      for (bool again = m.should_run_forward_backward(agree); again; again = m.should_run_forward_backward(agree)) {
        got.events.push_back("run iteration=" + std::to_string(m.current_iteration()) + " pass=" + std::to_string(pass) +
                             " state=" + std::to_string(static_cast<int>(m.state())));
        for (double loss : pass == 0 ? initial : rerun) {
          loss = static_cast<float>(loss);
          m.validate_result(loss, [](double v) { return std::isnan(v); }, "found NaN in local forward loss calculation", 0.0, true);
          m.validate_result(loss, [](double v) { return std::isinf(v); }, "found Inf in local forward loss calculation", 0.0, true);
          if (s.spiky)
            m.validate_result(loss, [&](double v) { return m.is_unexpectedly_large(v, spiky_loss_factor, "loss"); },
                              "Spiky loss", 0.0, false);
        }
        ++pass;
      }
    } catch (const std::runtime_error& e) {
      got.events.push_back(std::string("raise ") + e.what());
      break;
    }
    const auto end = m.should_checkpoint_and_exit();
    got.events.push_back("end iteration=" + std::to_string(m.current_iteration()) + " state=" +
                         std::to_string(static_cast<int>(m.state())) + " checkpoint=" + bool_text(end.checkpoint) +
                         " exit=" + bool_text(end.exit) + " code=" + std::to_string(end.exit_code));
    if (end.exit) break;
  }
  std::ifstream lines(tracker);
  for (std::string line; std::getline(lines, line);) {
    // Without the timestamp ("ts=DATE TIME "), as the reference writes them.
    const auto second_space = line.find(' ', line.find(' ') + 1);
    got.tracker.push_back(line.substr(second_space + 1));
  }
  return got;
}

}  // namespace

TEST_CASE("the result validation decides, logs and tracks as Megatron's RerunStateMachine on scripted losses") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/result_validation" / std::to_string(getpid());
  fs::create_directories(dir);
  const std::string command = std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                              "/tests/training/rerun_reference.py " + (dir / "reference.txt").string() + " " + dir.string();
  REQUIRE(std::system(command.c_str()) == 0);
  const auto scenarios = read_scenarios(dir / "reference.txt");
  REQUIRE(scenarios.size() >= 15);
  int exits_16 = 0, exits_17 = 0, raises = 0;
  for (const auto& s : scenarios) {
    INFO("scenario " << s.name);
    const auto got = replay(s, dir / (s.name + ".mactor.txt"));
    CHECK(got.events == s.events);
    CHECK(got.logs == s.logs);
    CHECK(got.tracker == s.tracker);
    for (const auto& e : s.events) {
      exits_16 += e.find("code=16") != std::string::npos;
      exits_17 += e.find("code=17") != std::string::npos;
      raises += e.rfind("raise", 0) == 0;
    }
  }
  // The scenarios reach both exit codes and the disabled mode's error.
  CHECK(exits_16 >= 3);
  CHECK(exits_17 >= 3);
  CHECK(raises == 1);
}

TEST_CASE("the result validation compares results as Megatron's _compare_floats") {
  CHECK(compare_results(2.0, 2.0) == 0.0);
  CHECK(compare_results(NAN, NAN) == 0.0);
  CHECK(std::isinf(compare_results(NAN, 1.0)));
  CHECK(std::isinf(compare_results(INFINITY, 1.0)));
  CHECK(compare_results(2.0, 3.0) == Approx(0.4));
}
