// --use-te-activation-func end to end through pretrain_gpt. Under Megatron-Core's TE spec the
// MLP's activation becomes Transformer Engine's op: GELU by the tanh formula (what the fused
// bias-GeLU computes, so a run equals the fused one and not the erf GeLU one) and SwiGLU, which
// knows no clamp (so a clamped run equals the fused SwiGLU, which ignores the clamp too, and not
// the unfused one, which clamps). The tanh GeLU itself is checked against PyTorch in
// tests/model/pytorch_reference.test.cpp (gpt_reference.py). Megatron's refusals exit 2.
#include <catch2/catch.hpp>

#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

const std::string flags =
    "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
    "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 3 --lr 1e-2 "
    "--init-method-std 0.2 --tokenizer-type NullTokenizer --vocab-size 8192 --hidden-dropout 0 --attention-dropout 0 "
    "--log-interval 1 --eval-iters 0 --seed 3";

std::vector<double> losses(const std::string& extra) { return parse_losses(launch(1, flags + extra).out).train; }

}  // namespace

TEST_CASE("use-te-activation-func runs Transformer Engine's tanh GELU and unclamped SwiGLU") {
  const auto fused_gelu = losses("");
  const auto te_gelu = losses(" --no-bias-gelu-fusion --use-te-activation-func");
  const auto erf_gelu = losses(" --no-bias-gelu-fusion");
  REQUIRE(fused_gelu.size() == 3);
  CHECK(te_gelu == fused_gelu);
  CHECK(te_gelu != erf_gelu);
  // The local spec has no TE module: the plain (erf) GeLU.
  CHECK(losses(" --no-bias-gelu-fusion --use-te-activation-func --transformer-impl local") == erf_gelu);

  const std::string swiglu = " --swiglu --activation-func-clamp-value 0.05";
  const auto fused_swiglu = losses(swiglu);
  const auto te_swiglu = losses(swiglu + " --no-bias-swiglu-fusion --use-te-activation-func");
  const auto clamped = losses(swiglu + " --no-bias-swiglu-fusion");
  CHECK(te_swiglu == fused_swiglu);
  CHECK(te_swiglu != clamped);
}

TEST_CASE("use-te-activation-func is refused where Megatron refuses it") {
  auto refused = [](const std::string& extra, const std::string& words) {
    const auto r = launch(1, flags + extra, 2);
    CHECK(r.err.find(words) != std::string::npos);
  };
  refused(" --use-te-activation-func", "cannot be combined with bias activation fusion");
  refused(" --no-bias-gelu-fusion --squared-relu --use-te-activation-func", "TransformerEngine only support gelu");
  refused(" --swiglu --no-bias-swiglu-fusion --use-te-activation-func --transformer-impl local",
          "needs Transformer Engine's SwiGLU module");
}
