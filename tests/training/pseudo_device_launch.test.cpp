// pretrain_gpt trains with its model on a device: the pseudo-device's harness
// (pretrain_gpt_on_pseudo_device) logs the host run's iteration lines, the same numbers to the
// last printed digit: losses, learning rates, gradient norms, zero counts, params norms. One
// rank (fp32, bf16), tensor, pipeline and data parallelism (the collectives and the pipeline's
// transfers take device tensors through host copies), the distributed optimizer.
#include <catch2/catch.hpp>

#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

std::string flags(const std::string& extra) {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 "
         "--train-iters 6 --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 "
         "--weight-decay 0.1 --init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 "
         "--log-interval 1 --eval-interval 3 --eval-iters 1 --seed 7 --hidden-dropout 0.1 --attention-dropout 0.1 "
         "--log-num-zeros-in-grad --log-params-norm " +
         extra;
}

void check_same_log(const std::string& extra, int ranks = 1) {
  INFO("flags: " << extra);
  const auto host = launch(ranks, flags(extra));
  const auto device = launch(ranks, flags(extra), 0, "pretrain_gpt_on_pseudo_device");
  const auto want = iteration_lines(host.out), got = iteration_lines(device.out);
  REQUIRE(want.size() == 6);
  CHECK(got == want);
  CHECK(parse_losses(device.out).validation == parse_losses(host.out).validation);
}

}  // namespace

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (fp32)") { check_same_log(""); }

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (bf16, Llama-style)") {
  check_same_log("--bf16 --normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear "
                 "--untie-embeddings-and-output-weights --group-query-attention --num-query-groups 2");
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (TP2 with sequence parallelism)") {
  check_same_log("--tensor-model-parallel-size 2 --sequence-parallel", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (PP2)") {
  check_same_log("--pipeline-model-parallel-size 2", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (DP2 distributed optimizer bf16 overlapped)") {
  check_same_log("--bf16 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device refuses --save with a message naming the gap") {
  const auto dir = scratch_dir("pseudo_device", "save");
  const auto r = run_shell(launch_command(1, flags("--save " + dir.string() + " --save-interval 3"),
                                          "pretrain_gpt_on_pseudo_device"));
  CHECK(r.status != 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("checkpoints of a model on a GPU are not built yet"));
  CHECK_FALSE(std::filesystem::exists(dir / "latest_checkpointed_iteration.txt"));
}
