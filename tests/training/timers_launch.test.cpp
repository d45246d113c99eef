// Megatron's timers blocks from real multi-rank runs under `mactor -np 2`: after every training
// line, the timers of the chosen level only, values that hang together (a rank's forward-backward
// holds its compute and waits, the optimizer holds its parts, min <= max); 'evaluate' before each
// validation block.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/tools/run_command.hpp"

namespace {

const std::string flags =
    " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32"
    " --micro-batch-size 2 --global-batch-size 8 --train-iters 4 --lr 1e-3 --log-interval 2 --eval-iters 0"
    " --mock-data --tokenizer-type NullTokenizer --vocab-size 8192 --clip-grad 1.0";

std::string launch(const std::string& extra) {
  const std::string command = mactor::test::mactor_bin() + " -np 2 " + mactor::test::bin_dir() + "/pretrain_gpt" + flags + extra;
  const auto r = mactor::test::run_shell(command);
  INFO(command << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  return r.out;
}

// The text after each training line up to the next line that is not part of a timers block.
std::vector<std::string> blocks(const std::string& out) {
  std::vector<std::string> found;
  std::size_t at = 0;
  while ((at = out.find("| number of nan iterations:", at)) != std::string::npos) {
    std::size_t line = out.find('\n', at) + 1;
    // After the first log line Megatron prints each rank's memory report before the timers.
    while (out.compare(line, 6, "[Rank ") == 0) line = out.find('\n', line) + 1;
    std::size_t end = line;
    while (end < out.size() && (out.compare(end, 4, "    ") == 0 || out.compare(end, 2, "  ") == 0 ||
                                out.compare(end, 5, "(min,") == 0 || out.compare(end, 5, "times") == 0))
      end = out.find('\n', end) + 1;
    found.push_back(out.substr(line, end - line));
    at = line;
  }
  return found;
}

struct min_max {
  double min = 0, max = 0;
};

std::map<std::string, min_max> parse_min_max(const std::string& block) {
  std::map<std::string, min_max> out;
  static const std::regex line(R"(\n    ([a-z-]+) \.*: \(([0-9.]+), ([0-9.]+)\))");
  for (auto it = std::sregex_iterator(block.begin(), block.end(), line); it != std::sregex_iterator(); ++it)
    out[(*it)[1].str()] = {std::stod((*it)[2].str()), std::stod((*it)[3].str())};
  return out;
}

// timer -> rank -> ms, from a --timing-log-option all block.
std::map<std::string, std::map<int, double>> parse_all(const std::string& block) {
  std::map<std::string, std::map<int, double>> out;
  static const std::regex name(R"(^  ([a-z-]+):$)"), rank(R"(^     rank +([0-9]+): ([0-9.]+)$)");
  std::string current;
  std::size_t at = 0;
  while (at < block.size()) {
    const auto end = block.find('\n', at);
    const std::string text = block.substr(at, end - at);
    std::smatch m;
    if (std::regex_match(text, m, name)) current = m[1].str();
    else if (std::regex_match(text, m, rank)) out[current][std::stoi(m[1].str())] = std::stod(m[2].str());
    at = end == std::string::npos ? block.size() : end + 1;
  }
  return out;
}

// A rank's value, 0 where the block has none.
double ms(const std::map<std::string, std::map<int, double>>& t, const std::string& name, int rank) {
  const auto timer = t.find(name);
  if (timer == t.end()) return 0.0;
  const auto value = timer->second.find(rank);
  return value == timer->second.end() ? 0.0 : value->second;
}

}  // namespace

TEST_CASE("two pipeline stages at --timing-log-level 2 time compute and waits inside forward-backward on each rank") {
  const auto b = blocks(launch(" --pipeline-model-parallel-size 2 --timing-log-level 2 --timing-log-option all"));
  REQUIRE(b.size() == 2);
  for (const auto& block : b) {
    INFO(block);
    REQUIRE(block.rfind("times across ranks (ms):\n", 0) == 0);
    const auto t = parse_all(block);
    for (const char* name : {"forward-backward", "forward-compute", "backward-compute", "optimizer-inner-step", "optimizer"}) {
      INFO(name);
      REQUIRE(t.count(name) == 1);
      CHECK(t.at(name).size() == 2);  // both ranks
    }
    for (int rank : {0, 1}) {
      INFO("rank " << rank);
      // Each value is rounded to 0.01 ms.
      const double inside = ms(t, "forward-compute", rank) + ms(t, "backward-compute", rank) +
                            ms(t, "forward-recv", rank) + ms(t, "backward-recv", rank);
      CHECK(ms(t, "forward-backward", rank) >= inside - 0.025);
      const double parts = ms(t, "optimizer-clip-main-grad", rank) + ms(t, "optimizer-count-zeros", rank) +
                           ms(t, "optimizer-inner-step", rank);
      CHECK(ms(t, "optimizer", rank) >= parts - 0.02);
      CHECK(ms(t, "forward-compute", rank) > 0.0);
    }
    // The first stage gets no activations and the last no gradients from anyone.
    CHECK((t.count("forward-recv") == 0 || t.at("forward-recv").count(0) == 0));
    CHECK((t.count("backward-recv") == 0 || t.at("backward-recv").count(1) == 0));
    CHECK(t.count("params-all-gather") == 0);
  }
}

TEST_CASE("two data-parallel ranks at --timing-log-level 1 print the level-1 timers with min <= max") {
  const auto b = blocks(launch(" --use-distributed-optimizer --timing-log-level 1"));
  REQUIRE(b.size() == 2);
  const std::set<std::string> level1 = {"forward-backward", "embedding-grads-all-reduce", "all-grads-sync",
                                        "params-all-gather", "optimizer-copy-to-main-grad",
                                        "optimizer-clip-main-grad", "optimizer-count-zeros", "optimizer-inner-step",
                                        "optimizer-copy-main-to-model-params", "optimizer"};
  for (const auto& block : b) {
    INFO(block);
    REQUIRE(block.rfind("(min, max) time across ranks (ms):\n", 0) == 0);
    const auto t = parse_min_max(block);
    for (const auto& [name, v] : t) {
      INFO(name);
      CHECK(level1.count(name) == 1);
      CHECK(v.min >= 0.0);
      CHECK(v.min <= v.max);
    }
    // Timed regions that do work on every rank (the others may round to zero and be left out).
    for (const char* name : {"forward-backward", "all-grads-sync", "params-all-gather", "optimizer-clip-main-grad",
                             "optimizer-inner-step", "optimizer"}) {
      INFO(name);
      REQUIRE(t.count(name) == 1);
      CHECK(t.at(name).max > 0.0);
    }
    CHECK(t.at("forward-backward").max >= t.at("all-grads-sync").max - 0.01);
    CHECK(t.at("optimizer").max >= t.at("params-all-gather").max - 0.01);
    // The distributed optimizer copies its main parameters into the model, as Megatron's does;
    // there is no loss scaler to unscale with.
    CHECK(t.count("optimizer-copy-main-to-model-params") == 1);
    CHECK(t.count("optimizer-unscale-and-check-inf") == 0);
  }
}

TEST_CASE("fp16 at --timing-log-level 1 times the loss scaler's unscale and the main-parameter copy, as Megatron's Float16 optimizer") {
  const auto b = blocks(launch(" --fp16 --initial-loss-scale 4096 --timing-log-level 1"));
  REQUIRE(b.size() == 2);
  for (const auto& block : b) {
    INFO(block);
    const auto t = parse_min_max(block);
    for (const char* name : {"optimizer-copy-to-main-grad", "optimizer-unscale-and-check-inf",
                             "optimizer-copy-main-to-model-params"}) {
      INFO(name);
      REQUIRE(t.count(name) == 1);
      CHECK(t.at(name).max > 0.0);
    }
    CHECK(t.at("optimizer").max >= t.at("optimizer-unscale-and-check-inf").max - 0.01);
  }
}

TEST_CASE("at the default --timing-log-level 0 only the level-0 'evaluate' timer prints, before each validation block") {
  const auto out = launch(" --pipeline-model-parallel-size 2 --eval-iters 1 --eval-interval 2");
  CHECK(out.find("forward-backward") == std::string::npos);
  CHECK(out.find("\n    optimizer ...") == std::string::npos);
  static const std::regex evaluate(
      R"(\n\(min, max\) time across ranks \(ms\):\n    evaluate \.+: \(([0-9.]+), ([0-9.]+)\)\n-+\n validation loss at)");
  int blocks = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), evaluate); it != std::sregex_iterator(); ++it, ++blocks) {
    const double lo = std::stod((*it)[1].str()), hi = std::stod((*it)[2].str());
    CHECK(lo > 0.0);
    CHECK(lo <= hi);
  }
  // At iterations 2 and 4, then the final validation and test evaluations.
  CHECK(blocks == 4);
  std::size_t validations = 0;
  for (auto at = out.find(" validation loss at"); at != std::string::npos; at = out.find(" validation loss at", at + 1)) ++validations;
  CHECK(validations == 4);
}
