// Uneven pipelines, the embedding/loss accounted as layers, Megatron's layout strings (with virtual
// stages and empty stages) and --overlap-p2p-communication-warmup-flush, launched with `mactor`:
// each logs the one-process lm loss every iteration (fp32, relative difference <= 1e-5) and the
// same validation loss.
#include <catch2/catch.hpp>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 8;

std::string model_flags() {
  return "--mock-data --num-layers 8 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --train-iters 8 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0 "
         "--attention-dropout 0 --log-interval 1 --eval-interval 4 --eval-iters 1 --seed 7";
}

const logged_losses& alone() {
  static const logged_losses one = run_job(1, model_flags(), 4, iterations);
  return one;
}

void check_layout(int ranks, const std::string& layout) {
  check_layout_against(alone(), ranks, model_flags(), layout, 4, iterations);
}

}  // namespace

TEST_CASE("PP4 with uneven first and last stages (1, 2, 2, 3 layers) logs the one-process losses") {
  check_layout(4, "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 1 "
                  "--decoder-last-pipeline-num-layers 3");
}

TEST_CASE("TP2 x PP2 with the embedding and the loss accounted as layers logs the one-process losses") {
  check_layout(4, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                  "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
}

TEST_CASE("PP2 interleaved (vp 2) with an uneven first stage and DP2 with the distributed optimizer logs the one-process losses") {
  check_layout(4, "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                  "--decoder-first-pipeline-num-layers 2 --use-distributed-optimizer");
}

TEST_CASE("PP4 with a layout string (vp 2, an empty stage, a loss-only stage) logs the one-process losses") {
  check_layout(4, "--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout 'Et|tt|t|t|t||tt|L'");
}

TEST_CASE("PP2 x DP2 with a layout string, an empty chunk and overlapped distributed-optimizer sync logs the one-process losses") {
  check_layout(4, "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et|tt||tttttL' "
                  "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 2000");
}

TEST_CASE("PP4 interleaved (vp 2) with an uneven last stage and the warmup/flush receives posted early logs the one-process losses") {
  check_layout(4, "--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                  "--decoder-last-pipeline-num-layers 2 --overlap-p2p-communication-warmup-flush");
}
