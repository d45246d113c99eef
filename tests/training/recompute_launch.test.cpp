// Activation recomputation through pretrain_gpt, as Megatron's functional-test scripts set it:
// a recomputed run logs exactly the losses (and validation losses) the same layout logs without
// it, in bf16 with dropout on. The bit-for-bit comparison of gradients is in
// tests/model/recompute.test.cpp; this checks the flags reach every stage of a real job.
#include <catch2/catch.hpp>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 10;

std::string script(const std::string& layout) {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 "
         "--train-iters 10 --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 "
         "--clip-grad 1.0 --weight-decay 0.1 --init-method-std 0.05 --tokenizer-type NullTokenizer "
         "--vocab-size 4095 --log-interval 1 --eval-interval 5 --eval-iters 1 --seed 9 --bf16 "
         "--attention-softmax-in-fp32 --hidden-dropout 0.1 --attention-dropout 0.1 " + layout;
}

void check_recompute(int ranks, const std::string& layout, const std::string& recompute) {
  INFO("layout: " << layout << "; recompute: " << recompute);
  const auto plain = run_job(ranks, script(layout), 4, iterations);
  REQUIRE(plain.train.front() != plain.train.back());
  const auto recomputed = run_job(ranks, script(layout) + " " + recompute, 4, iterations);
  check_same(recomputed.train, plain.train, ("lm loss, " + recompute).c_str(), ranks, 0.0);
  check_same(recomputed.validation, plain.validation, ("validation lm loss, " + recompute).c_str(), ranks, 0.0);
}

}  // namespace

TEST_CASE("full uniform recomputation under TP2 x PP2 logs the losses of the run without it") {
  check_recompute(4, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2",
                  "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
}

TEST_CASE("full block recomputation with distributed saved activations under TP2 logs the losses of the run without it") {
  check_recompute(2, "--tensor-model-parallel-size 2",
                  "--recompute-granularity full --recompute-method block --recompute-num-layers 3 "
                  "--distribute-saved-activations");
}

TEST_CASE("selective recomputation of core_attn, layernorm and mlp under TP2 with sequence parallelism logs the losses of the run without it") {
  check_recompute(2, "--tensor-model-parallel-size 2 --sequence-parallel",
                  "--recompute-granularity selective --recompute-modules core_attn layernorm mlp");
}
