// --deterministic-mode: Megatron's rules (no flash attention, no fused cross-entropy, NCCL_ALGO
// one of its deterministic algorithms) and its promise: the same job twice gives the same bits.
// mactor's kernels and collectives reduce in a fixed order, so every run keeps it; the test runs
// a TP2 x PP2 job with dropout twice and compares every logged number.
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

std::vector<std::string> logged_numbers(const std::string& out) {
  std::vector<std::string> numbers;
  static const std::regex value(R"((lm loss|grad norm|lm loss value|learning rate): ([-+0-9.eE]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), value); it != std::sregex_iterator(); ++it)
    numbers.push_back((*it)[1].str() + "=" + (*it)[2].str());
  return numbers;
}

const std::string job =
    " --mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
    "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr 1e-2 "
    "--tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-interval 3 --eval-iters 1 --seed 4 "
    "--bf16 --hidden-dropout 0.1 --attention-dropout 0.1 --tensor-model-parallel-size 2 "
    "--pipeline-model-parallel-size 2 --deterministic-mode";

}  // namespace

TEST_CASE("deterministic mode: a TP2 x PP2 job run twice logs the same numbers, and Megatron's NCCL_ALGO rule holds") {
  const std::string command = mactor_bin() + " -np 4 --oversubscribe " + bin_dir() + "/pretrain_gpt" + job;
  const auto first = run_shell("NCCL_ALGO=Ring " + command);
  const auto second = run_shell("NCCL_ALGO=Tree " + command);
  INFO(first.err << second.err);
  REQUIRE(first.status == 0);
  REQUIRE(second.status == 0);
  const auto a = logged_numbers(first.out), b = logged_numbers(second.out);
  CHECK(a.size() >= 6 * 3);
  CHECK(a == b);
  const auto refused = run_shell("NCCL_ALGO=NVLS " + command);
  CHECK(refused.status == 2);
  CHECK(refused.err.find("NCCL_ALGO") != std::string::npos);
}
