// fp16 training with Megatron's dynamic loss scaler, launched as a 2-stage pipeline: a loss scale
// made to overflow skips steps (both stages agree), the logged scale after every iteration equals
// megatron-core's DynamicGradScaler fed the same overflow flags, a skipped step leaves the
// learning-rate schedule where it was, and the run trains.
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "tests/model/optimizer_python_reference.hpp"
#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

struct logged_iteration {
  double loss_scale = 0, learning_rate = 0;
  int skipped = 0;
  bool has_loss = false;
  double loss = 0;
};

std::vector<logged_iteration> parse_iterations(const std::string& log) {
  static const std::regex line(R"(iteration +\d+/ +\d+ \|[^\n]*)");
  static const std::regex scale(R"(loss scale: ([0-9.]+) \|)"), lr(R"(learning rate: ([-+0-9.eE]+) \|)"),
      skipped(R"(number of skipped iterations: +(\d+) \|)"), loss(R"(\| lm loss: ([-+0-9.eE]+) \|)");
  std::vector<logged_iteration> out;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
    const std::string text = it->str();
    logged_iteration i;
    std::smatch m;
    REQUIRE(std::regex_search(text, m, scale));
    i.loss_scale = std::stod(m[1].str());
    REQUIRE(std::regex_search(text, m, lr));
    i.learning_rate = std::stod(m[1].str());
    REQUIRE(std::regex_search(text, m, skipped));
    i.skipped = std::stoi(m[1].str());
    if (std::regex_search(text, m, loss)) i.has_loss = true, i.loss = std::stod(m[1].str());
    out.push_back(i);
  }
  return out;
}

}  // namespace

TEST_CASE("fp16 with an overflowing loss scale skips steps and backs off as megatron-core's scaler, then trains") {
  const std::string flags =
      "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
      "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 24 --lr 1e-2 "
      "--lr-warmup-iters 8 --tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-iters 0 "
      "--seed 5 --fp16 --initial-loss-scale 268435456 --loss-scale-window 4 --hysteresis 2 "
      "--pipeline-model-parallel-size 2";
  const auto r = run_shell(mactor_bin() + " -np 2 " + bin_dir() + "/pretrain_gpt " + flags);
  INFO(r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0) << r.err);
  REQUIRE(r.status == 0);
  const auto its = parse_iterations(r.out);
  REQUIRE(its.size() == 24);

  std::vector<int> found;
  for (const auto& i : its) found.push_back(i.skipped);
  const auto ref = run_python_reference(
      "grad_scaler_reference.py", "dynamic",
      {{"options", {{"initial_scale", 268435456.0}, {"min_scale", 1.0}, {"growth_interval", 4}, {"hysteresis", 2}}},
       {"found_inf", found}});
  const auto want = ref["scales"].get<std::vector<double>>();
  int skips = 0, steps = 0, grew = 0;
  for (std::size_t k = 0; k < its.size(); ++k) {
    INFO("iteration " << k + 1 << ": scale " << its[k].loss_scale << " vs " << want[k] << ", skipped " << its[k].skipped);
    CHECK(its[k].loss_scale == want[k]);
    CHECK(its[k].has_loss == (its[k].skipped == 0));  // Megatron averages the loss over steps taken
    if (its[k].skipped) {
      ++skips;
      // No step: the schedule stays (the first iteration shows the scheduler's start, 0 in warmup).
      if (k > 0) CHECK(its[k].learning_rate == its[k - 1].learning_rate);
    } else {
      ++steps;
    }
    if (k > 0 && its[k].loss_scale > its[k - 1].loss_scale) ++grew;
  }
  CHECK(its.front().skipped == 1);  // 2^28 overflows fp16 at once
  CHECK(skips >= 2);                // hysteresis 2: backing off needs two
  CHECK(steps >= 8);                // fp16 gradient buffers (Megatron's default) overflow again as the scale grows
  CHECK(grew >= 1);                 // four clean steps in a row double the scale
  // It trains: the last steps' loss below the first step's.
  double first = 0, last = 0;
  for (const auto& i : its)
    if (i.has_loss) (first == 0 ? first : last) = i.loss;
  CHECK(last < first);
}
