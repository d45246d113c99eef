// --rampup-batch-size as Megatron's train loop runs it: each iteration's global batch size,
// consumed samples and learning rate equal megatron-core's own calculator and scheduler stepped
// as training.py steps them (tests/training/rampup_reference.py), and DP2 logs the one-process
// losses while the batch grows.
#include <catch2/catch.hpp>
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

struct logged_iteration {
  long iteration, global_batch, consumed;
  double learning_rate, loss;
};

std::vector<logged_iteration> iterations_of(const std::string& out) {
  static const std::regex line(
      R"(iteration +(\d+)/ *\d+ \| consumed samples: +(\d+) \|.*learning rate: ([-+0-9.eE]+) \| global batch size: +(\d+) \| lm loss: ([-+0-9.eE]+))");
  std::vector<logged_iteration> got;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    got.push_back({std::stol((*it)[1]), std::stol((*it)[4]), std::stol((*it)[2]), std::stod((*it)[3]), std::stod((*it)[5])});
  return got;
}

const std::string ramp_flags =
    "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
    "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --rampup-batch-size 4 4 48 "
    "--train-samples 160 --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-samples 16 --lr-decay-samples 128 "
    "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0 --attention-dropout 0 "
    "--log-interval 1 --eval-iters 0 --seed 7";

run_result launch(int ranks) {
  const std::string program = bin_dir() + "/pretrain_gpt";
  const std::string command =
      ranks == 1 ? program + " " + ramp_flags
                 : mactor_bin() + " -np " + std::to_string(ranks) + " --oversubscribe " + program + " " + ramp_flags;
  auto r = run_shell(command);
  INFO(command << "\n" << r.out << "\n" << r.err);
  REQUIRE(r.status == 0);
  return r;
}

}  // namespace

TEST_CASE("with --rampup-batch-size the global batch, consumed samples and learning rate follow Megatron's calculator") {
  const auto two = launch(2);
  const auto got = iterations_of(two.out);
  const auto reference = run_shell(std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                                   "/tests/training/rampup_reference.py 2 2 16 4 4 48 160 1e-2 1e-3 16 128");
  INFO(reference.err);
  REQUIRE(reference.status == 0);
  std::vector<logged_iteration> want;
  std::istringstream lines(reference.out);
  for (logged_iteration w{}; lines >> w.iteration >> w.global_batch >> w.consumed >> w.learning_rate;) want.push_back(w);
  REQUIRE(want.size() == 14);
  REQUIRE(got.size() == want.size());  // the number of iterations: Megatron's update_train_iters
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("iteration " << want[i].iteration);
    CHECK(got[i].iteration == want[i].iteration);
    CHECK(got[i].global_batch == want[i].global_batch);
    CHECK(got[i].consumed == want[i].consumed);
    CHECK(std::abs(got[i].learning_rate - want[i].learning_rate) <= 1e-6 * want[i].learning_rate);  // printed to 7 digits
  }
  // The batch really grew from 4 to 16, and the coordinator said so as Megatron's calculator does.
  CHECK(got.front().global_batch == 4);
  CHECK(got.back().global_batch == 16);
  CHECK_THAT(two.out, Catch::Contains("setting initial batch size to 4") && Catch::Contains("ramping up batch size from 4 to 8") &&
                          Catch::Contains("ramping up batch size from 12 to 16"));

  // One process reads the same samples in the same order: the same losses.
  const auto one = iterations_of(launch(1).out);
  REQUIRE(one.size() == got.size());
  REQUIRE(one.front().loss != one.back().loss);
  std::vector<double> spread, alone;
  for (std::size_t i = 0; i < one.size(); ++i) spread.push_back(got[i].loss), alone.push_back(one[i].loss);
  check_same(spread, alone, "lm loss during the batch ramp-up, DP2", 2);
}

TEST_CASE("a ramp-up increment that a ramp step cannot split over micro batch x dp is refused before training") {
  const auto r = run_shell(mactor_bin() + " -np 2 --oversubscribe " + bin_dir() + "/pretrain_gpt " +
                           std::regex_replace(ramp_flags, std::regex("--rampup-batch-size 4 4 48"), "--rampup-batch-size 4 2 48"));
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--rampup-batch-size increment 2 must be divisible by --micro-batch-size x data-parallel size = 4"));
}
