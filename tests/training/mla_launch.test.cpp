// --multi-latent-attention launched with `mactor`: TP2 with sequence parallelism x DP2 with the
// distributed optimizer, PP2, CP2 and CP2 x TP2 with sequence parallelism, log the one-process
// lm losses (DeepSeek-style: query latent,
// latent norms, YaRN with mscale); a TP2 checkpoint resumes under PP2 on the one-process losses.
#include <catch2/catch.hpp>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

std::string model_flags() {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--multi-latent-attention --q-lora-rank 16 --kv-lora-rank 8 --qk-head-dim 8 --qk-pos-emb-head-dim 4 "
         "--v-head-dim 8 --qk-layernorm --rope-type yarn --rotary-scaling-factor 4 --mscale 0.7 --mscale-all-dim 0.7 "
         "--normalization RMSNorm --position-embedding-type rope --disable-bias-linear --seq-length 16 "
         "--max-position-embeddings 16 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr 1e-2 "
         "--clip-grad 1.0 --init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 "
         "--log-interval 1 --eval-interval 3 --eval-iters 1 --seed 5";
}

}  // namespace

TEST_CASE("multi-latent attention under TP2 with sequence parallelism x DP2, PP2, CP2 and CP2 x TP2 logs the one-process losses") {
  const auto one = run_job(1, model_flags(), 4, 6);
  check_layout_against(one, 4, model_flags(),
                       "--tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer", 4, 6);
  check_layout_against(one, 2, model_flags(), "--pipeline-model-parallel-size 2", 4, 6);
  check_layout_against(one, 2, model_flags(), "--context-parallel-size 2", 4, 6);
  check_layout_against(one, 4, model_flags(), "--context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel", 4, 6);

  // Saved by TP2 at iteration 3, loaded by PP2 (resharded): iterations 4..6 as in one process.
  const auto dir = scratch_dir("mla_launch", "tp2_checkpoint");
  launch(2, model_flags() + " --tensor-model-parallel-size 2 --save " + dir.string() +
                " --save-interval 6 --exit-interval 3");
  const auto resumed = launch(2, model_flags() + " --pipeline-model-parallel-size 2 --load " + dir.string());
  const auto got = parse_losses(resumed.out).train;
  REQUIRE(got.size() == 3);
  check_same(got, std::vector<double>(one.train.begin() + 3, one.train.end()), "lm loss resumed from a TP2 checkpoint", 2);
}
