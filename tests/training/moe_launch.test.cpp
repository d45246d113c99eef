// A Mixtral-style tiny MoE (8 experts, top-2, SwiGLU, aux and z losses) through pretrain_gpt:
// every pipeline and data-parallel layout under `mactor -np 2/4` logs one process's lm loss
// each iteration (fp32, relative difference <= 1e-5). Data parallelism halves the micro-batches
// per rank, so the layouts agree only if the auxiliary losses' gradient is scaled by
// 1 / num_microbatches as Megatron's MoEAuxLossAutoScaler scales it.
#include <catch2/catch.hpp>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 8;

std::string moe_flags(const std::string& aux = "--moe-aux-loss-coeff 0.1 --moe-z-loss-coeff 0.01") {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --train-iters 8 --lr 1e-2 "
         "--min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 "
         "--eval-interval 4 --eval-iters 1 --seed 9 --hidden-dropout 0 --attention-dropout 0 --disable-bias-linear "
         "--swiglu --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 32 --moe-layer-freq '([0]*1+[1]*3)' " + aux;
}

const logged_losses& alone() {
  static const logged_losses one = run_job(1, moe_flags(), 4, iterations);
  return one;
}

void check_layout(int ranks, const std::string& layout) {
  INFO("layout: " << layout);
  const auto& one = alone();
  const auto spread = run_job(ranks, moe_flags() + " " + layout, 4, iterations);
  check_same(spread.train, one.train, ("MoE lm loss, " + layout).c_str(), ranks);
  check_same(spread.validation, one.validation, ("MoE validation/test lm loss, " + layout).c_str(), ranks);
}

}  // namespace

TEST_CASE("a tiny MoE trains on one process, and its auxiliary losses change the run") {
  const auto& one = alone();
  CHECK(one.train.back() < one.train.front());
  const auto without = run_job(1, moe_flags("--moe-aux-loss-coeff 0"), 4, iterations);
  CHECK(without.train.front() == one.train.front());  // the forward's lm loss holds no aux loss
  double most = 0;
  for (std::size_t i = 1; i < iterations; ++i)
    most = std::max(most, std::abs(without.train[i] - one.train[i]) / one.train[i]);
  CHECK(most > 1e-4);
}

TEST_CASE("a tiny MoE under PP2 logs one process's losses") { check_layout(2, "--pipeline-model-parallel-size 2"); }

TEST_CASE("a tiny MoE under DP2 logs one process's losses") { check_layout(2, ""); }

TEST_CASE("a tiny MoE under PP2 x DP2 with the alltoall dispatcher logs one process's losses") {
  check_layout(4, "--pipeline-model-parallel-size 2 --moe-token-dispatcher-type alltoall");
}
