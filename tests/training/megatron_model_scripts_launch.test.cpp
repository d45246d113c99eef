// The measure of issues 19, 20 and 21: Megatron's own model scripts train under `mactor -np 8` and
// log one process's losses. The flag sets are Megatron-LM core_v0.15.0's
//   - tests/functional_tests/test_cases/gpt/gpt3_mr_mcore_te_tp2_pp2_cp2_dgx_a100_1N8G and
//     gpt3_mr_mcore_te_tp1_pp2_cp4_a2a_p2p_nondeterministic_dgx_a100_1N8G (context parallelism:
//     ring attention under TP2 PP2 CP2, hierarchical a2a+p2p over 2 x 2 under PP2 CP4),
//   - examples/mixtral/train_mixtral_8x7b_distributed.sh (grouped GEMM, alltoall, distributed
//     optimizer with overlapped grad reduce and param gather),
//   - examples/post_training/modelopt/conf/qwen/Qwen3-30B-A3B.sh (qk-layernorm, top-8 routing in an
//     fp32 router, vocabulary padded by 1187),
//   - tests/functional_tests/test_cases/mixtral/deepseekv3_proxy_flex_tp1pp4emp16etp1cp1_release
//     (MLA with a query latent, MoE with group-limited sigmoid routing and expert bias, a shared
//     expert, one MTP depth, the pipeline layout string Et*2|(tt|)*5t|tmL, the flex dispatcher),
//   - examples/post_training/modelopt/conf/deepseek-ai/DeepSeek-V2-Lite.sh (MLA without a query
//     latent, YaRN, pre-softmax top-6 with a shared expert, seq_aux_loss),
//   - examples/post_training/modelopt/conf/nvidia/Nemotron-H-8B-Base-8K.sh through pretrain_mamba
//     (a hybrid Mamba / attention / squared-ReLU MLP stack),
// every flag kept but the sizes shrunk to a tiny model (hidden 64, 16 experts at most, the layer
// counts and the hybrid pattern shortened), mock data for the data paths and tokenizer, and a
// schedule of 8 iterations (the DeepSeek-V3 proxy's in samples, as its own). All bf16: the layouts
// sum 16-bit gradients in another order than one process, so the losses agree to 1e-4 (measured on
// 2026-12-06: lm losses within 1e-5 for the MoE models, 2.4e-5 for the hybrid one; the
// load-balancing losses within 2.7e-5). The finer points are pinned in fp32 by the layout tests of
// each feature (moe_launch_tests, expert_parallel_launch_tests, the MLA, MTP and hybrid ones).
#include <catch2/catch.hpp>

#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 8;

const std::string data = " --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-interval 4 --eval-iters 1";
const std::string schedule =
    " --global-batch-size 16 --train-iters 8 --lr-decay-iters 8 --lr-warmup-iters 2 --lr 1e-3 --min-lr 1e-4 "
    "--lr-decay-style cosine" + data;

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

// The DeepSeek-V3 proxy functional test's MODEL_ARGS (14 layers kept; 128 heads of 7168 -> 4 of 64,
// 64 experts in 8 groups -> 16 in 8, MLA's latents and heads shrunk; lr raised from 3.9e-6 so that
// 8 iterations move; its parallel sizes, layout string and flex dispatcher given per run).
const std::string deepseek_v3_proxy =
    "--distributed-timeout-minutes 60 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
    "--use-mcore-models --sequence-parallel --use-flash-attn --disable-bias-linear --micro-batch-size 1 "
    "--global-batch-size 16 --train-samples 128 --no-check-for-nan-in-loss-and-grad --cross-entropy-loss-fusion "
    "--cross-entropy-fusion-impl te --manual-gc --manual-gc-interval 10 --transformer-impl transformer_engine "
    "--seq-length 64 --split 99,1,0 --no-mmap-bin-files --no-create-attention-mask-in-dataloader --num-workers 6 "
    "--num-layers 14 --hidden-size 64 --ffn-hidden-size 192 --num-attention-heads 4 --kv-channels 16 "
    "--max-position-embeddings 4096 --position-embedding-type rope --rotary-base 10000 "
    "--make-vocab-size-divisible-by 3232 --normalization RMSNorm --norm-epsilon 1e-6 --swiglu "
    "--untie-embeddings-and-output-weights --multi-latent-attention --mtp-num-layers 1 --mtp-loss-scaling-factor 0.1 "
    "--attention-dropout 0.0 --hidden-dropout 0.0 --clip-grad 1.0 --weight-decay 0.1 --qk-layernorm "
    "--lr-decay-samples 128 --lr-warmup-samples 32 --lr-warmup-init 1e-4 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine "
    "--adam-beta1 0.9 --adam-beta2 0.95 --num-experts 16 --moe-layer-freq '([0]*3+[1]*11)' --moe-ffn-hidden-size 32 "
    "--moe-shared-expert-intermediate-size 32 --moe-router-load-balancing-type seq_aux_loss --moe-router-topk 8 "
    "--moe-router-pre-softmax --moe-grouped-gemm --moe-aux-loss-coeff 1e-4 --moe-router-group-topk 4 "
    "--moe-router-num-groups 8 --moe-router-topk-scaling-factor 2.5 --moe-router-score-function sigmoid "
    "--moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-3 --moe-router-dtype fp32 --moe-permute-fusion "
    "--q-lora-rank 24 --kv-lora-rank 16 --qk-head-dim 16 --qk-pos-emb-head-dim 8 --v-head-dim 16 "
    "--rotary-scaling-factor 40 --mscale 1.0 --mscale-all-dim 1.0 --init-method-std 0.02 --log-num-zeros-in-grad "
    "--log-params-norm --log-throughput --bf16 --enable-experimental --expert-tensor-parallel-size 1 "
    "--context-parallel-size 1 --tensor-model-parallel-size 1" +
    data;

// DeepSeek-V2-Lite.sh's MODEL_ARGS (27 layers -> 4, 64 experts of 1408 -> 16 of 24, MLA's widths shrunk).
const std::string deepseek_v2_lite =
    "--attention-dropout 0.0 --hidden-dropout 0.0 --micro-batch-size 1 --bf16 --no-masked-softmax-fusion "
    "--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope --no-rope-fusion "
    "--normalization RMSNorm --norm-epsilon 1e-6 --swiglu --num-layers 4 --hidden-size 64 --ffn-hidden-size 192 "
    "--num-attention-heads 4 --kv-channels 16 --multi-latent-attention --kv-lora-rank 16 --v-head-dim 16 "
    "--qk-head-dim 16 --qk-layernorm --qk-pos-emb-head-dim 8 --num-experts 16 --moe-layer-freq '([0]+[1]*3)' "
    "--moe-ffn-hidden-size 24 --moe-grouped-gemm --moe-router-score-function softmax --moe-router-topk 6 "
    "--moe-router-topk-scaling-factor 1.0 --moe-router-pre-softmax --moe-shared-expert-intermediate-size 48 "
    "--moe-aux-loss-coeff 1e-3 --moe-token-dispatcher-type alltoall --moe-token-drop-policy probs "
    "--moe-router-load-balancing-type seq_aux_loss --seq-length 64 --max-position-embeddings 1024 "
    "--make-vocab-size-divisible-by 3200 --attention-softmax-in-fp32 --use-mcore-models --rotary-percent 1.0 "
    "--rotary-base 10000 --rotary-scaling-factor 40 --mscale 0.707 --mscale-all-dim 0.707 --sequence-parallel" +
    schedule;

// Nemotron-H-8B-Base-8K.sh's MODEL_ARGS (52 layers of M-M-M-M*-... -> 8 of M-M*M-M-, 128 Mamba
// heads of 64 -> 16 of 8, state 128 -> 16), with the --spec pretrain_mamba requires; its
// --export-model-type is the post-training converter's flag, which pretrain_mamba does not take.
const std::string nemotron_h_8b =
    "--micro-batch-size 1 --bf16 --no-masked-softmax-fusion --disable-bias-linear --untie-embeddings-and-output-weights "
    "--use-rotary-position-embeddings --no-rope-fusion --no-position-embedding --normalization RMSNorm --squared-relu "
    "--num-layers 8 --hidden-size 64 --ffn-hidden-size 224 --num-attention-heads 4 --group-query-attention "
    "--num-query-groups 2 --hybrid-override-pattern M-M*M-M- --is-hybrid-model --mamba-head-dim 8 "
    "--mamba-num-heads 16 --mamba-num-groups 4 --mamba-state-dim 16 --seq-length 64 --max-position-embeddings 8192 "
    "--make-vocab-size-divisible-by 1 --use-mcore-models --rotary-percent 0.5 --rotary-base 500000 "
    "--spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec" +
    schedule;

// The two GPT functional tests' MODEL_ARGS without their parallel sizes (given per run) and
// paths: 12 layers of 512 -> 4 of 64 (8 heads kept), sequence 1024 -> 64, 50 iterations -> 8 at
// lr 1e-3 decaying over them (0.00015 over 320000 iterations barely moves in 8).
const std::string gpt3_functional =
    "--num-layers 4 --hidden-size 64 --num-attention-heads 8 --log-params-norm --log-num-zeros-in-grad "
    "--log-validation-ppl-to-tensorboard --log-timers-to-tensorboard --micro-batch-size 4 --global-batch-size 32 "
    "--seq-length 64 --max-position-embeddings 64 --train-iters 8 --timing-log-level 2 --lr-decay-iters 8 "
    "--split 949,50,1 --distributed-backend nccl --lr 1e-3 --lr-decay-style cosine --min-lr 1e-05 --weight-decay 1e-2 "
    "--clip-grad 1.0 --lr-warmup-fraction 0.01 --save-interval 10000 --transformer-impl transformer_engine "
    "--hidden-dropout 0.0 --attention-dropout 0.0 --no-gradient-accumulation-fusion --attention-softmax-in-fp32 "
    "--use-mcore-models --ckpt-format torch_dist --dist-ckpt-strictness log_all --bf16 --attention-backend flash "
    "--log-memory-to-tensorboard" +
    data;

struct script_run {
  logged_losses losses;
  std::vector<double> balancing_loss, mtp_loss;
};

script_run run(int ranks, const std::string& flags, const std::string& program = "pretrain_gpt") {
  const auto r = launch(ranks, flags, 0, program);
  const auto seq = logged_values(r.out, "seq_load_balancing_loss");
  script_run m{parse_losses(r.out), seq.empty() ? logged_values(r.out, "load_balancing_loss") : seq,
               logged_values(r.out, "mtp_1 loss")};
  REQUIRE(m.losses.train.size() == iterations);
  REQUIRE(m.losses.validation.size() == 4);
  return m;
}

// Runs `model + layout` on 8 ranks against `one`, the model on one process.
void check_layout(const std::string& model, const script_run& one, const std::string& layout,
                  const std::string& program = "pretrain_gpt") {
  INFO(layout);
  REQUIRE(one.losses.train.back() < one.losses.train.front());  // it trains
  const auto eight = run(8, model + " " + layout, program);
  check_same(eight.losses.train, one.losses.train, ("lm loss, " + layout).c_str(), 8, 1e-4);
  check_same(eight.losses.validation, one.losses.validation, ("validation lm loss, " + layout).c_str(), 8, 1e-4);
  REQUIRE(eight.balancing_loss.size() == one.balancing_loss.size());
  if (!one.balancing_loss.empty())
    check_same(eight.balancing_loss, one.balancing_loss, ("load-balancing loss, " + layout).c_str(), 8, 1e-4);
  REQUIRE(eight.mtp_loss.size() == one.mtp_loss.size());
  if (!one.mtp_loss.empty()) check_same(eight.mtp_loss, one.mtp_loss, ("mtp_1 loss, " + layout).c_str(), 8, 1e-4);
}

}  // namespace

TEST_CASE("Megatron's GPT context-parallel functional tests, shrunk, train on 8 ranks (TP2 PP2 CP2, then PP2 CP4 a2a+p2p) and log one process's losses") {
  const auto one = run(1, gpt3_functional);
  check_layout(gpt3_functional, one,
               "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --context-parallel-size 2 --sequence-parallel");
  check_layout(gpt3_functional, one,
               "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --context-parallel-size 4 "
               "--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2 --sequence-parallel");
}

TEST_CASE("Megatron's Mixtral 8x7B script, shrunk, trains on 8 ranks with EP and TP and logs one process's losses") {
  const auto one = run(1, mixtral_8x7b);
  REQUIRE(one.balancing_loss.size() == iterations);
  check_layout(mixtral_8x7b, one, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --expert-model-parallel-size 2");
  check_layout(mixtral_8x7b, one, "--pipeline-model-parallel-size 4 --expert-model-parallel-size 2");  // the script's PP4
}

TEST_CASE("Megatron's Qwen3-30B-A3B configuration, shrunk, trains on 8 ranks with EP and TP and logs one process's losses") {
  const auto one = run(1, qwen3_30b_a3b);
  REQUIRE(one.balancing_loss.size() == iterations);
  check_layout(qwen3_30b_a3b, one, "--tensor-model-parallel-size 2 --expert-model-parallel-size 4 --expert-tensor-parallel-size 1");
  check_layout(qwen3_30b_a3b, one, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --expert-model-parallel-size 2");
}

TEST_CASE("Megatron's DeepSeek-V3 proxy functional test, shrunk, trains on 8 ranks with its layout string and logs one process's losses") {
  // One process has no expert parallelism, which the flex dispatcher needs (Megatron's rule): it
  // routes through alltoall, which moves the same rows.
  const auto one = run(1, deepseek_v3_proxy + " --moe-token-dispatcher-type alltoall");
  REQUIRE(one.balancing_loss.size() == iterations);
  REQUIRE(one.mtp_loss.size() == iterations);
  check_layout(deepseek_v3_proxy, one,
               "--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout 'Et*2|(tt|)*5t|tmL' "
               "--expert-model-parallel-size 2 --moe-token-dispatcher-type flex --moe-enable-deepep");
}

TEST_CASE("Megatron's DeepSeek-V2-Lite configuration, shrunk, trains on 8 ranks with EP, TP and PP and logs one process's losses") {
  const auto one = run(1, deepseek_v2_lite);
  REQUIRE(one.balancing_loss.size() == iterations);
  check_layout(deepseek_v2_lite, one, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --expert-model-parallel-size 2");
}

TEST_CASE("Megatron's Nemotron-H 8B configuration, shrunk, trains through pretrain_mamba on 8 ranks and logs one process's losses") {
  const auto one = run(1, nemotron_h_8b, "pretrain_mamba");
  check_layout(nemotron_h_8b, one, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel",
               "pretrain_mamba");
}
