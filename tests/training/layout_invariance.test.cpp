// Layout invariance across tensor (with and without sequence parallelism), pipeline (with
// interleaving) and data parallelism, launched with
// `mactor`: with a fixed seed and data, every layout logs the one-process lm loss every iteration
// (fp32, relative difference <= 1e-5), and the same validation loss through the forward-only schedule.
#include <catch2/catch.hpp>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 20;

// NullTokenizer adds EOD: 4096 tokens, already a multiple of 128 x tp, so every layout pads to the same vocabulary.
std::string model_flags(bool dropout = false) {
  return "--mock-data --num-layers 8 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --train-iters 20 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 4 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 "
         "--log-interval 1 --eval-interval 10 --eval-iters 1 --seed 7 " +
         std::string(dropout ? "--hidden-dropout 0.1 --attention-dropout 0.1" : "--hidden-dropout 0 --attention-dropout 0");
}

const logged_losses& alone(bool dropout) {
  static const logged_losses without = run_job(1, model_flags(false), 4, iterations);
  if (!dropout) return without;
  static const logged_losses with = run_job(1, model_flags(true), 4, iterations);
  return with;
}

void check_layout(int ranks, const std::string& layout, bool dropout = false) {
  INFO("layout: " << layout << (dropout ? ", dropout 0.1" : ""));
  const auto& one = alone(dropout);
  REQUIRE(one.train.front() != one.train.back());  // training must move for the comparison to mean anything
  const auto spread = run_job(ranks, model_flags(dropout) + " " + layout, 4, iterations);
  check_same(spread.train, one.train, ("lm loss, " + layout).c_str(), ranks);
  check_same(spread.validation, one.validation, ("validation/test lm loss, " + layout).c_str(), ranks);
}

}  // namespace

TEST_CASE("TP2 x PP2 logs the one-process losses") {
  check_layout(4, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2");
}

TEST_CASE("PP4 with interleaving (vp 2) logs the one-process losses") {
  check_layout(4, "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 1");
}

TEST_CASE("TP2 x DP2 logs the one-process losses") {
  check_layout(4, "--tensor-model-parallel-size 2");
}

TEST_CASE("PP2 x DP2 with the distributed optimizer logs the one-process losses") {
  check_layout(4, "--pipeline-model-parallel-size 2 --use-distributed-optimizer");
}

TEST_CASE("TP2 x PP2 x DP2 logs the one-process losses") {
  check_layout(8, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2");
}

TEST_CASE("TP2 with sequence parallelism logs the one-process losses") {
  check_layout(2, "--tensor-model-parallel-size 2 --sequence-parallel");
}

TEST_CASE("TP2 x PP2 with sequence parallelism logs the one-process losses") {
  check_layout(4, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel");
}

TEST_CASE("TP2 x DP2 with sequence parallelism and the distributed optimizer logs the one-process losses") {
  check_layout(4, "--tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer");
}

TEST_CASE("TP2 x PP2 with sequence parallelism and dropout logs the one-process losses with dropout") {
  // Each tp rank draws the dropout masks of its own sequence shard: the same elements as one process.
  check_layout(4, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel", true);
}

TEST_CASE("DP2 with --overlap-grad-reduce and small buckets logs the one-process losses") {
  // 20k-element buckets: several per model, each reduced while the backward goes on.
  check_layout(2, "--overlap-grad-reduce --ddp-bucket-size 20000");
}

TEST_CASE("PP2 x DP2 interleaved with the distributed optimizer and overlapped reduce and gather logs the one-process losses") {
  check_layout(4, "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 --use-distributed-optimizer "
                  "--overlap-grad-reduce --overlap-param-gather");
}
