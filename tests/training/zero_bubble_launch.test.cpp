// ZB-H1 (--pipeline-schedule zb-h1) under `mactor`: the weight gradients a backward leaves to the
// W pass are the same numbers added in the same order as 1F1B's, so every layer kind (dense GPT
// with biases and tied embeddings, MoE experts and router with tensor and expert parallelism,
// multi-latent attention with multi-token prediction) logs 1F1B's lines and saves 1F1B's
// model and Adam moments bit for bit, with the overlapped gradient reduction and the
// distributed optimizer too.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/training/checkpoint_compare.hpp"
#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_moe_flags.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

std::string dense_flags() {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --train-iters 4 --lr-decay-iters 4 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 1 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0.1 "
         "--attention-dropout 0.1 --log-interval 1 --eval-interval 2 --eval-iters 1 --seed 13 --log-params-norm";
}

std::string mla_mtp_flags() {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--multi-latent-attention --q-lora-rank 16 --kv-lora-rank 8 --qk-head-dim 8 --qk-pos-emb-head-dim 4 "
         "--v-head-dim 8 --qk-layernorm --normalization RMSNorm --position-embedding-type rope --disable-bias-linear "
         "--mtp-num-layers 1 --seq-length 16 --max-position-embeddings 16 --micro-batch-size 2 --global-batch-size 8 "
         "--train-iters 4 --lr 1e-2 --clip-grad 1.0 --init-method-std 0.05 --tokenizer-type NullTokenizer "
         "--vocab-size 4095 --log-interval 1 --eval-interval 2 --eval-iters 1 --seed 5";
}

// A hybrid Mamba model (pattern M*-M, as tests/training/hybrid_launch.test.cpp trains it).
std::string hybrid_flags() {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec --hybrid-override-pattern M*-M "
         "--mamba-state-dim 8 --mamba-head-dim 8 --mamba-num-groups 2 --is-hybrid-model "
         "--position-embedding-type none --normalization RMSNorm --disable-bias-linear "
         "--untie-embeddings-and-output-weights --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 "
         "--global-batch-size 8 --train-iters 4 --lr 1e-2 --clip-grad 1.0 --init-method-std 0.1 "
         "--tokenizer-type NullTokenizer --vocab-size 8191 --hidden-dropout 0.1 --log-interval 1 --seed 99";
}

// Runs `flags` under 1F1B and ZB-H1 on `ranks` processes, saving at the last iteration, and checks
// that both log the same lines and save the same tensors, byte for byte.
void check_zero_bubble_equals_one_f_one_b(int ranks, const std::string& flags, std::int64_t iterations, const std::string& name,
                                          const std::string& program = "pretrain_gpt") {
  INFO(name << ": " << flags);
  const auto one_dir = scratch_dir("zero_bubble", name + "_1f1b"), zb_dir = scratch_dir("zero_bubble", name + "_zb");
  const std::string save = " --save-interval " + std::to_string(iterations) + " --save ";
  const auto one = launch(ranks, flags + " --pipeline-schedule 1f1b" + save + one_dir.string(), 0, program);
  const auto zb = launch(ranks, flags + " --pipeline-schedule zb-h1" + save + zb_dir.string(), 0, program);
  const auto want = iteration_lines(one.out), got = iteration_lines(zb.out);
  REQUIRE(want.size() == std::size_t(iterations));
  REQUIRE(logged_values(one.out, "lm loss").front() != logged_values(one.out, "lm loss").back());
  CHECK(got == want);  // lm loss, grad norm, params norm, ... as printed
  CHECK(check_same_tensors(one_dir, zb_dir, iterations) > 0);
  std::printf("%s: ZB-H1 equals 1F1B bit for bit over %lld iterations\n", name.c_str(), static_cast<long long>(iterations));
}

}  // namespace

TEST_CASE("ZB-H1 trains a dense GPT over PP4 bit for bit as 1F1B does") {
  check_zero_bubble_equals_one_f_one_b(4, dense_flags() + " --pipeline-model-parallel-size 4", 4, "dense_pp4");
}

TEST_CASE("ZB-H1 with the distributed optimizer and overlapped gradient reduction over PP2 x DP2 equals 1F1B bit for bit") {
  check_zero_bubble_equals_one_f_one_b(
      4, dense_flags() + " --pipeline-model-parallel-size 2 --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 2000", 4,
      "dense_pp2_dp2_overlap");
}

TEST_CASE("ZB-H1 trains MoE over PP2 x TP2 with sequence parallelism, and MLA with MTP over PP2, bit for bit as 1F1B") {
  check_zero_bubble_equals_one_f_one_b(
      4, tiny_moe_flags() + " --train-iters 4 --lr-decay-iters 4 --pipeline-model-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel", 4,
      "moe_pp2_tp2");
  check_zero_bubble_equals_one_f_one_b(2, mla_mtp_flags() + " --pipeline-model-parallel-size 2", 4, "mla_mtp_pp2");
}

// The Mamba mixer's conv weight and bias and its gated norm's weight wait for the W pass (the scan's
// A_log, D and dt_bias gradients come out of the scan's backward itself and stay there).
TEST_CASE("ZB-H1 trains a hybrid Mamba model over PP2 and PP2 x CP2 bit for bit as 1F1B") {
  check_zero_bubble_equals_one_f_one_b(2, hybrid_flags() + " --pipeline-model-parallel-size 2", 4, "hybrid_pp2",
                                       "pretrain_mamba");
  check_zero_bubble_equals_one_f_one_b(4, hybrid_flags() + " --pipeline-model-parallel-size 2 --context-parallel-size 2", 4,
                                       "hybrid_pp2_cp2", "pretrain_mamba");
}

TEST_CASE("a pipeline schedule that cannot run is refused, naming the fix") {
  const auto vp = launch(4, dense_flags() + " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 "
                                            "--pipeline-schedule zb-h1", 2);
  CHECK(vp.err.find("--pipeline-schedule zb-h1 runs one model chunk per rank") != std::string::npos);
  CHECK(vp.err.find("interleaved-1f1b") != std::string::npos);
  const auto bad = launch(2, dense_flags() + " --pipeline-model-parallel-size 2 --pipeline-schedule pipedream", 2);
  CHECK(bad.err.find("argument --pipeline-schedule: invalid choice: 'pipedream'") != std::string::npos);
  const auto sharded = launch(4, dense_flags() + " --pipeline-model-parallel-size 2 --use-distributed-optimizer "
                                                 "--data-parallel-sharding-strategy optim_grads --pipeline-schedule zb-h1", 2);
  CHECK(sharded.err.find("--pipeline-schedule zb-h1 with sharded gradients") != std::string::npos);
}
