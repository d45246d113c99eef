// --num-distributed-optimizer-instances launched with `mactor`: DP4 with two distributed-optimizer
// instances (each sharding over two replicas, the shards summed across the instances), with and
// without overlapped reduce and gather, and CP2 x DP2 with two instances of one rank each, log the
// one-process losses; a checkpoint saved with two instances resumes in one process as the
// uninterrupted run continues.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t iterations = 6;

std::string model_flags() {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 16 "
         "--max-position-embeddings 16 --micro-batch-size 1 --global-batch-size 8 --train-iters 6 --lr 1e-2 "
         "--clip-grad 1.0 --weight-decay 0.1 --init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 "
         "--log-interval 1 --eval-interval 3 --eval-iters 1 --seed 9";
}

const logged_losses& alone() {
  static const logged_losses one = run_job(1, model_flags(), 4, iterations);
  return one;
}

}  // namespace

TEST_CASE("DP4 with two distributed-optimizer instances logs the one-process losses") {
  const std::string two = "--use-distributed-optimizer --num-distributed-optimizer-instances 2";
  check_layout_against(alone(), 4, model_flags(), two, 4, iterations);
  check_layout_against(alone(), 4, model_flags(), two + " --overlap-grad-reduce --overlap-param-gather", 4, iterations);
  check_layout_against(alone(), 4, model_flags(), "--context-parallel-size 2 " + two, 4, iterations);
}

TEST_CASE("a checkpoint saved with two distributed-optimizer instances resumes in one process") {
  const fs::path dir = scratch_dir("checkpoints", "instances");
  const auto& one = alone();
  run_job(4, model_flags() + " --use-distributed-optimizer --num-distributed-optimizer-instances 2 --save " + dir.string() +
                 " --save-interval 3 --exit-interval 3",
          1, 3);
  const auto resumed = run_job(1, model_flags() + " --load " + dir.string(), 3, 3);
  check_same(resumed.train, {one.train.begin() + 3, one.train.end()}, "lm loss after resuming a two-instance checkpoint", 1);
  fs::remove_all(dir);
}
