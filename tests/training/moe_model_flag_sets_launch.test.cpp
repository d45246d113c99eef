// Issue 19's measure: Megatron's own MoE model scripts train under `mactor -np 8` with expert and
// tensor parallelism and log one process's losses. The flag sets are Megatron-LM core_v0.15.0's
// examples/mixtral/train_mixtral_8x7b_distributed.sh (grouped GEMM, alltoall, distributed
// optimizer with overlapped grad reduce and param gather, bf16) and
// examples/post_training/modelopt/conf/qwen/Qwen3-30B-A3B.sh (qk-layernorm, kv-channels, top-8
// routing in an fp32 router, vocabulary padded by 1187), every flag kept but the sizes shrunk to a
// tiny model (4 layers, hidden 64, 8 and 16 experts), mock data for the data paths and tokenizer,
// and a schedule of 8 iterations. bf16: the layouts sum 16-bit gradients in another order than one
// process, so the losses agree to 1e-4 (measured on 2026-12-06: lm losses within 1e-5, the
// load-balancing loss within 2.7e-5). The finer points (the auxiliary losses' gradient scale,
// per-layer routing) are pinned in fp32 by moe_launch_tests and expert_parallel_launch_tests.
#include <catch2/catch.hpp>

#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 8;

const std::string schedule =
    " --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --global-batch-size 16 --train-iters 8 "
    "--lr-decay-iters 8 --lr-warmup-iters 2 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --log-interval 1 "
    "--eval-interval 4 --eval-iters 1";

// train_mixtral_8x7b_distributed.sh's MODEL_ARGS, MOE_ARGS, TRAINING_ARGS and MODEL_PARALLEL_ARGS
// (its TP1 PP4 EP8 layout given per test), sizes shrunk.
const std::string mixtral_8x7b =
    "--use-mcore-models --disable-bias-linear --seq-length 64 --max-position-embeddings 32768 --num-layers 4 "
    "--hidden-size 64 --ffn-hidden-size 224 --num-attention-heads 4 --init-method-std 0.01 --attention-dropout 0.0 "
    "--hidden-dropout 0.0 --normalization RMSNorm --position-embedding-type rope --swiglu "
    "--untie-embeddings-and-output-weights --group-query-attention --num-query-groups 2 --no-masked-softmax-fusion "
    "--no-position-embedding --rotary-base 1000000 --num-experts 8 --moe-router-topk 2 "
    "--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2 --moe-grouped-gemm "
    "--moe-token-dispatcher-type alltoall --overlap-param-gather --overlap-grad-reduce --split 99990,8,2 "
    "--micro-batch-size 1 --weight-decay 0.1 --clip-grad 1.0 --bf16 --use-distributed-optimizer --sequence-parallel" +
    schedule;

// Qwen3-30B-A3B.sh's MODEL_ARGS, sizes shrunk (128 experts of 768, top-8 -> 16 experts of 24, top-8).
const std::string qwen3_30b_a3b =
    "--micro-batch-size 1 --bf16 --no-masked-softmax-fusion --disable-bias-linear --untie-embeddings-and-output-weights "
    "--position-embedding-type rope --no-rope-fusion --normalization RMSNorm --swiglu --num-layers 4 --hidden-size 64 "
    "--ffn-hidden-size 192 --num-attention-heads 4 --group-query-attention --num-query-groups 2 --kv-channels 16 "
    "--qk-layernorm --num-experts 16 --moe-ffn-hidden-size 24 --moe-router-topk 8 --moe-router-dtype fp32 "
    "--moe-aux-loss-coeff 1e-3 --moe-token-dispatcher-type alltoall --moe-router-load-balancing-type aux_loss "
    "--seq-length 64 --max-position-embeddings 40960 --make-vocab-size-divisible-by 1187 --use-mcore-models "
    "--rotary-percent 1.0 --rotary-base 1000000 --no-bias-swiglu-fusion --sequence-parallel" +
    schedule;

struct moe_run {
  logged_losses losses;
  std::vector<double> load_balancing_loss;
};

moe_run run(int ranks, const std::string& flags) {
  const auto r = launch(ranks, flags);
  moe_run m{parse_losses(r.out), logged_values(r.out, "load_balancing_loss")};
  REQUIRE(m.losses.train.size() == iterations);
  REQUIRE(m.losses.validation.size() == 4);
  REQUIRE(m.load_balancing_loss.size() == iterations);
  return m;
}

void check_layout(const std::string& model, const moe_run& one, const std::string& layout) {
  INFO(layout);
  REQUIRE(one.losses.train.back() < one.losses.train.front());  // it trains
  const auto eight = run(8, model + " " + layout);
  check_same(eight.losses.train, one.losses.train, ("lm loss, " + layout).c_str(), 8, 1e-4);
  check_same(eight.losses.validation, one.losses.validation, ("validation lm loss, " + layout).c_str(), 8, 1e-4);
  check_same(eight.load_balancing_loss, one.load_balancing_loss, ("load_balancing_loss, " + layout).c_str(), 8, 1e-4);
}

}  // namespace

TEST_CASE("Megatron's Mixtral 8x7B script, shrunk, trains on 8 ranks with EP and TP and logs one process's losses") {
  const auto one = run(1, mixtral_8x7b);
  check_layout(mixtral_8x7b, one, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --expert-model-parallel-size 2");
  check_layout(mixtral_8x7b, one, "--pipeline-model-parallel-size 4 --expert-model-parallel-size 2");  // the script's PP4
}

TEST_CASE("Megatron's Qwen3-30B-A3B configuration, shrunk, trains on 8 ranks with EP and TP and logs one process's losses") {
  const auto one = run(1, qwen3_30b_a3b);
  check_layout(qwen3_30b_a3b, one, "--tensor-model-parallel-size 2 --expert-model-parallel-size 4 --expert-tensor-parallel-size 1");
  check_layout(qwen3_30b_a3b, one, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --expert-model-parallel-size 2");
}
