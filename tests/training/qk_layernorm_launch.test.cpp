// --qk-layernorm with tensor and data parallelism, and --test-mode's cross-rank check of its
// weights, launched with `mactor`: TP2 x DP2 logs the one-process lm loss every iteration (the
// norms' gradients summed over the tensor-parallel ranks) and the same validation loss.
#include <catch2/catch.hpp>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

std::string model_flags() {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--qk-layernorm --test-mode --normalization RMSNorm --position-embedding-type rope --seq-length 16 "
         "--max-position-embeddings 16 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr 1e-2 "
         "--clip-grad 1.0 --init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 "
         "--log-interval 1 --eval-interval 3 --eval-iters 1 --seed 5";
}

}  // namespace

TEST_CASE("qk-layernorm with --test-mode under TP2 x DP2 logs the one-process losses") {
  const auto one = run_job(1, model_flags(), 4, 6);
  REQUIRE(one.train.front() != one.train.back());
  const auto spread = run_job(4, model_flags() + " --tensor-model-parallel-size 2 --use-distributed-optimizer", 4, 6);
  check_same(spread.train, one.train, "lm loss, qk-layernorm TP2 x DP2", 4);
  check_same(spread.validation, one.validation, "validation/test lm loss, qk-layernorm TP2 x DP2", 4);
}
