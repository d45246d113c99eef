// One failing and one passing command line for each remaining validation rule (numbers from
// shared/megatron/validation.md), on top of the base configuration of config_test_support.hpp.
#include <catch2/catch.hpp>

#include "config_test_support.hpp"

using namespace mactor::config::testing;

namespace {

struct rule_case {
  int rule;
  std::vector<std::string> failing;  // added to the base flags; must give `error`
  std::string error;
  std::vector<std::string> passing;  // added to the base flags; must validate
  std::int64_t world = 1;
};

validated run(const std::vector<std::string>& extra, std::int64_t world) {
  auto flags = base_flags();
  flags.insert(flags.end(), extra.begin(), extra.end());
  return validate_flags(flags, world);
}

const std::vector<rule_case>& cases() {
  static const std::vector<rule_case> table = {
      {4, {"--non-persistent-ckpt-type", "in_memory"}, "in_memory is not supported", {"--non-persistent-ckpt-type", "global"}},
      {7, {"--use-legacy-models"}, "--use-legacy-models needs --ckpt-format=torch", {"--use-legacy-models", "--ckpt-format", "torch"}},
      {9, {"--attention-backend", "local"}, "--attention-backend local is only supported with --spec local",
       {"--attention-backend", "local", "--spec", "local"}},
      {12, {"--perform-rl-step", "--grpo-prompts-per-step", "3", "--grpo-group-size", "1"}, "must be divisible by --global-batch-size=8",
       {"--perform-rl-step", "--grpo-prompts-per-step", "8", "--grpo-group-size", "1"}},
      {13, {"--context-parallel-size", "2", "--hierarchical-context-parallel-sizes", "3"}, "must equal --context-parallel-size=2",
       {"--context-parallel-size", "2", "--hierarchical-context-parallel-sizes", "2", "1"}, 2},
      {13, {"--cp-comm-type", "a2a+p2p"}, "--hierarchical-context-parallel-sizes must be set", {"--cp-comm-type", "a2a"}},
      {19, {"--train-data-path", "a", "--per-split-data-args-path", "b"}, "mutually exclusive", {"--per-split-data-args-path", "b"}},
      {27, {"--use-torch-fsdp2", "--use-distributed-optimizer"}, "--use-torch-fsdp2 is not supported with --use-distributed-optimizer",
       {"--use-torch-fsdp2", "--untie-embeddings-and-output-weights", "--no-gradient-accumulation-fusion"}},
      {28, {"--overlap-param-gather-with-optimizer-step"}, "only supported with distributed optimizer",
       {"--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"}},
      {30, {"--fp8-param-gather", "--fp8-format", "hybrid"}, "--fp8-param-gather is only supported with --use-distributed-optimizer",
       {"--fp8-param-gather", "--fp8-format", "hybrid", "--use-distributed-optimizer"}},
      {31, {"--fp4-format", "e2m1", "--fp8-format", "hybrid"}, "cannot be used simultaneously", {"--fp4-format", "e2m1"}},
      {31, {"--fp4-param-gather"}, "--fp4-param-gather requires --fp4-format", {"--fp4-param-gather", "--fp4-format", "e2m1"}},
      {32, {"--use-megatron-fsdp"}, "--use-megatron-fsdp requires --ckpt-format fsdp_dtensor",
       {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"}},
      {32, {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--data-parallel-sharding-strategy", "optim_grads_params",
            "--check-weight-hash-across-dp-replicas-interval", "10"},
       "--check-weight-hash-across-dp-replicas-interval is not supported with --data-parallel-sharding-strategy optim_grads_params",
       {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--data-parallel-sharding-strategy", "optim_grads",
        "--check-weight-hash-across-dp-replicas-interval", "10"}},
      {33, {"--bf16", "--accumulate-allreduce-grads-in-fp32", "--main-grads-dtype", "bf16"}, "requires --main-grads-dtype fp32",
       {"--bf16", "--accumulate-allreduce-grads-in-fp32"}},
      {34, {"--cuda-graph-impl", "local", "--cuda-graph-scope", "full_iteration"}, "--no-check-for-nan-in-loss-and-grad",
       {"--cuda-graph-impl", "local", "--cuda-graph-scope", "full_iteration", "--no-check-for-nan-in-loss-and-grad"}},
      {35, {"--num-dataset-builder-threads", "0"}, "--num-dataset-builder-threads=0 must be > 0", {"--num-dataset-builder-threads", "2"}},
      {37, {"--lr-decay-samples", "100"}, "use --lr-decay-iters rather than --lr-decay-samples", {"--lr-decay-iters", "10"}},
      {37, {"--lr-warmup-samples", "8"}, "use --lr-warmup-iters rather than --lr-warmup-samples", {"--lr-warmup-iters", "1"}},
      {39, {"--encoder-num-layers", "4"}, "cannot have both --num-layers and --encoder-num-layers", {"--num-layers", "2"}},
      {44, {"--encoder-seq-length", "32"}, "cannot have both --seq-length and --encoder-seq-length", {"--seq-length", "16"}},
      {45, {"--decoder-seq-length", "64"}, "must be >= --decoder-seq-length=64", {"--decoder-seq-length", "16"}},
      {47, {"--save", "c", "--save-interval", "4", "--save-retain-interval", "6"}, "must be a positive multiple of --save-interval=4",
       {"--save", "c", "--save-interval", "4", "--save-retain-interval", "8"}},
      {48, {"--fp32-residual-connection"}, "residual connection in fp32 only supported", {"--fp32-residual-connection", "--bf16"}},
      {49, {"--moe-grouped-gemm", "--num-experts", "4", "--moe-router-topk", "2"}, "only supports bf16",
       {"--moe-grouped-gemm", "--bf16", "--num-experts", "4", "--moe-router-topk", "2"}},
      {50, {"--weight-decay-incr-style", "constant", "--start-weight-decay", "0.1"}, "need --weight-decay-incr-style linear or cosine",
       {"--weight-decay-incr-style", "cosine", "--start-weight-decay", "0.0", "--end-weight-decay", "0.1"}},
      {52, {"--distribute-saved-activations"}, "--tensor-model-parallel-size > 1",
       {"--distribute-saved-activations", "--tensor-model-parallel-size", "2", "--recompute-granularity", "full", "--recompute-method",
        "uniform", "--recompute-num-layers", "1"}, 2},
      {53, {"--recompute-granularity", "selective", "--recompute-method", "uniform"}, "drop --recompute-method",
       {"--recompute-granularity", "selective"}},
      {54, {"--tensor-model-parallel-size", "2", "--tp-comm-overlap"}, "only when sequence parallelism is enabled",
       {"--tensor-model-parallel-size", "2", "--tp-comm-overlap", "--sequence-parallel"}, 2},
      {58, {"--retro-add-retriever", "--pipeline-model-parallel-size", "2"}, "retro currently does not support pipeline parallelism",
       {"--retro-add-retriever"}, 2},
      {59, {"--use-legacy-models", "--ckpt-format", "torch", "--decoupled-lr", "1e-3"}, "not supported in legacy models",
       {"--decoupled-lr", "1e-3"}},
      {60, {"--use-legacy-models", "--ckpt-format", "torch", "--rotary-interleaved"}, "--rotary-interleaved is not supported in legacy",
       {"--rotary-interleaved"}},
      {62, {"--position-embedding-type", "mrope"}, "needs --mrope-section",
       {"--position-embedding-type", "mrope", "--mrope-section", "4", "4"}},
      {62, {"--position-embedding-type", "relative", "--transformer-impl", "local"}, "only supported with --transformer-impl transformer_engine",
       {"--position-embedding-type", "relative"}},
      {63, {"--num-experts", "4", "--spec", "local", "--moe-router-topk", "2"}, "not supported with --num-experts",
       {"--num-experts", "4", "--moe-router-topk", "2"}},
      {64, {"--use-legacy-models", "--ckpt-format", "torch", "--context-parallel-size", "2"}, "not supported in legacy models",
       {"--context-parallel-size", "2"}, 2},
      {65, {"--expert-model-parallel-size", "2", "--num-experts", "4", "--moe-router-topk", "2", "--fp16"}, "not supported with --fp16",
       {"--expert-model-parallel-size", "2", "--num-experts", "4", "--moe-router-topk", "2", "--bf16"}, 2},
      {67, {"--ckpt-format", "torch_dcp"}, "only tested with FSDP",
       {"--ckpt-format", "torch_dcp", "--use-torch-fsdp2", "--untie-embeddings-and-output-weights", "--no-gradient-accumulation-fusion"}},
      {69, {"--deterministic-mode", "--use-flash-attn"}, "flash attention can not be used in deterministic mode", {"--use-flash-attn"}},
      {72, {"--disable-gloo-process-groups", "--use-distributed-optimizer", "--ckpt-format", "torch"}, "distributed checkpoint format",
       {"--disable-gloo-process-groups", "--use-distributed-optimizer"}},
      {74, {"--load-main-params-from-ckpt"}, "must be used with --no-load-optim", {"--load-main-params-from-ckpt", "--no-load-optim"}},
      {75, {"--inference-batch-times-seqlen-threshold", "4"}, "requires setting --pipeline-model-parallel-size > 1",
       {"--inference-batch-times-seqlen-threshold", "4", "--pipeline-model-parallel-size", "2"}, 2},
      {75, {"--inference-dynamic-batching", "--inference-dynamic-batching-block-size", "100"}, "must be a multiple of 256",
       {"--inference-dynamic-batching", "--inference-dynamic-batching-block-size", "512"}},
      // (mactor also asks for what the upcycling then reads: --num-experts and the dense --load.)
      {76, {"--moe-use-upcycling"}, "--moe-use-upcycling needs --save",
       {"--moe-use-upcycling", "--save", "c", "--save-interval", "5", "--num-experts", "4", "--load", "d"}},
      {77, {"--optimizer-cpu-offload"}, "requires --use-precision-aware-optimizer",
       {"--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--use-distributed-optimizer"}},
      {78, {"--non-persistent-ckpt-type", "local"}, "needs --non-persistent-local-ckpt-dir",
       {"--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "d"}},
      {78, {"--replication"}, "--replication needs --replication-jump",
       {"--replication", "--replication-jump", "1", "--replication-factor", "1", "--non-persistent-ckpt-type", "local",
        "--non-persistent-local-ckpt-dir", "d"}},
      {79, {"--delay-wgrad-compute", "--transformer-impl", "local"}, "only supported with --transformer-impl transformer_engine",
       {"--delay-wgrad-compute", "--overlap-moe-expert-parallel-comm", "--expert-model-parallel-size", "2", "--num-experts", "4",
        "--moe-router-topk", "2", "--bf16", "--moe-token-dispatcher-type", "alltoall"}, 2},
      {114, {"--delay-wgrad-compute"}, "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute",
       {"--delay-wgrad-compute", "--overlap-moe-expert-parallel-comm", "--expert-model-parallel-size", "2", "--num-experts", "4",
        "--moe-router-topk", "2", "--bf16", "--moe-token-dispatcher-type", "alltoall"}, 2},
      {111, {"--moe-router-padding-for-fp8"}, "fp8 must be specified when moe_router_padding_for_fp8 is True",
       {"--moe-router-padding-for-fp8", "--fp8-format", "hybrid", "--moe-token-dispatcher-type", "alltoall"}},
      {111, {"--moe-router-padding-for-fp8", "--fp8-format", "hybrid", "--moe-token-dispatcher-type", "allgather"},
       "allgather and alltoall_seq dispatcher does not support moe_router_padding_for_fp8",
       {"--moe-router-padding-for-fp8", "--fp8-format", "hybrid", "--moe-token-dispatcher-type", "alltoall"}},
      // GroupedMLP.__init__ (--moe-use-legacy-grouped-gemm with --moe-grouped-gemm).
      {0, {"--num-experts", "4", "--moe-router-topk", "2", "--bf16", "--moe-grouped-gemm", "--moe-use-legacy-grouped-gemm",
           "--quick-geglu", "--disable-bias-linear"}, "Activation function must be silu or gelu when using GroupedMLP",
       {"--num-experts", "4", "--moe-router-topk", "2", "--bf16", "--moe-grouped-gemm", "--quick-geglu", "--disable-bias-linear"}},
      {0, {"--num-experts", "4", "--moe-router-topk", "2", "--bf16", "--moe-grouped-gemm", "--moe-use-legacy-grouped-gemm",
           "--disable-bias-linear", "--fp8-format", "hybrid", "--recompute-granularity", "selective", "--recompute-modules", "moe_act"},
       "moe_act recompute for fp8 cannot work with the legacy GroupedMLP",
       {"--num-experts", "4", "--moe-router-topk", "2", "--bf16", "--moe-grouped-gemm", "--moe-use-legacy-grouped-gemm",
        "--disable-bias-linear", "--recompute-granularity", "selective", "--recompute-modules", "moe_act"}},
      {80, {"--mtp-num-layers", "1"}, "needs --position-embedding-type rope or none",
       {"--mtp-num-layers", "1", "--position-embedding-type", "rope"}},
      {80, {"--mtp-num-layers", "-1", "--position-embedding-type", "rope"}, "must be a positive number of MTP layers",
       {"--mtp-num-layers", "2", "--position-embedding-type", "rope"}},
      {113, {"--cuda-graph-impl", "local", "--recompute-granularity", "selective"}, "CUDA graphs not supported with activation recomputation",
       {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn", "--recompute-granularity", "selective",
        "--recompute-modules", "mlp"}},
      {113, {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn", "--recompute-granularity", "selective"},
       "attn cuda graph is not supported with core_attn recompute",
       {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn", "--recompute-granularity", "selective",
        "--recompute-modules", "layernorm", "mlp"}},
      {81, {"--cuda-graph-impl", "local", "--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"},
       "full recompute is not supported with CUDA graphs", {"--cuda-graph-impl", "local"}},
      {90, {"--defer-embedding-wgrad-compute"}, "needs --pipeline-model-parallel-size > 1",
       {"--defer-embedding-wgrad-compute", "--pipeline-model-parallel-size", "2"}, 2},
      {92, {"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
            "--microbatch-group-size-per-virtual-pipeline-stage", "1"}, "must be between",
       {"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2"}, 2},
      {93, {"--overlap-p2p-communication-warmup-flush"}, "--overlap-p2p-communication-warmup-flush needs p2p overlap",
       {"--overlap-p2p-communication-warmup-flush", "--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2"}, 2},
      {97, {"--fp8-format", "hybrid", "--first-last-layers-bf16"}, "not supported with --fp8-recipe delayed",
       {"--fp8-format", "hybrid", "--first-last-layers-bf16", "--fp8-recipe", "tensorwise"}},
      {99, {"--moe-ffn-hidden-size", "32"}, "--moe-ffn-hidden-size needs --num-experts",
       {"--moe-ffn-hidden-size", "32", "--num-experts", "2", "--moe-router-topk", "2"}},
      {100, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-enable-deepep"}, "needs --moe-token-dispatcher-type flex",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-enable-deepep", "--moe-token-dispatcher-type", "flex",
        "--expert-model-parallel-size", "2"}, 2},
      {100, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-token-dispatcher-type", "flex", "--expert-model-parallel-size", "2"},
       "DeepEP is not enabled",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-token-dispatcher-type", "flex", "--expert-model-parallel-size", "2",
        "--moe-enable-deepep"}, 2},
      {100, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-token-dispatcher-type", "flex", "--moe-enable-deepep"},
       "Flex token dispatcher requires TPxEP > 1",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-token-dispatcher-type", "flex", "--moe-enable-deepep",
        "--tensor-model-parallel-size", "2", "--sequence-parallel", "--disable-bias-linear"}, 2},
      {100, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-shared-expert-overlap"}, "needs --moe-token-dispatcher-type alltoall",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-shared-expert-overlap", "--moe-token-dispatcher-type", "alltoall"}},
      {101, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-router-load-balancing-type", "aux_loss", "sinkhorn"},
       "one value per --moe-router-load-balancing-type entry",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-router-load-balancing-type", "aux_loss", "sinkhorn",
        "--moe-aux-loss-coeff", "0.1", "0.0"}},
      {101, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-pad-expert-input-to-capacity"}, "needs --moe-expert-capacity-factor",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-pad-expert-input-to-capacity", "--moe-expert-capacity-factor", "1.0"}},
      {104, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-shared-expert-intermediate-size", "16", "--moe-token-dispatcher-type",
             "alltoall", "--moe-shared-expert-overlap", "--recompute-granularity", "selective", "--recompute-modules", "shared_experts"},
       "shared_experts recompute cannot work with --moe-shared-expert-overlap",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-shared-expert-intermediate-size", "16", "--moe-token-dispatcher-type",
        "alltoall", "--recompute-granularity", "selective", "--recompute-modules", "shared_experts"}},
      {104, {"--moe-layer-recompute", "--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"},
       "cannot be combined with --recompute-granularity full", {"--moe-layer-recompute"}},
      {105, {"--decoder-first-pipeline-num-layers", "1", "--account-for-embedding-in-pipeline-split", "--pipeline-model-parallel-size", "2"},
       "cannot be combined", {"--decoder-first-pipeline-num-layers", "1", "--pipeline-model-parallel-size", "2"}, 2},
      {107, {"--decoder-first-pipeline-num-layers", "1", "--pipeline-model-parallel-size", "3"}, "do not divide evenly",
       {"--decoder-first-pipeline-num-layers", "2", "--pipeline-model-parallel-size", "3"}, 3},
      {108, {"--account-for-loss-in-pipeline-split", "--pipeline-model-parallel-size", "2"}, "is not divisible by --pipeline-model-parallel-size=2",
       {"--account-for-loss-in-pipeline-split", "--account-for-embedding-in-pipeline-split", "--pipeline-model-parallel-size", "2"}, 2},
      // Megatron's DistributedDataParallel (no rule number, shown as 0): averaging in the collective needs the 1/dp mean.
      {0, {"--ddp-average-in-collective", "--calculate-per-token-loss"}, "cannot be combined with --calculate-per-token-loss",
       {"--ddp-average-in-collective"}},
      {109, {"--disable-bias-linear", "--add-qkv-bias"}, "", {}},  // bias_gelu_fusion is forced off: no error (see next)
      {109, {"--swiglu", "--squared-relu"}, "--squared-relu cannot be combined with --swiglu", {"--squared-relu", "--disable-bias-linear"}},
      {109, {"--squared-relu"}, "--squared-relu needs --no-bias-gelu-fusion", {"--squared-relu", "--no-bias-gelu-fusion"}},
      // GLU variants: Megatron-Core's dense MLP has no fused quick_geglu; an offset needs quick_geglu when fused.
      {109, {"--quick-geglu"}, "--quick-geglu with bias-GeLU fusion", {"--quick-geglu", "--no-bias-gelu-fusion"}},
      {109, {"--swiglu", "--quick-geglu", "--no-bias-gelu-fusion"}, "--quick-geglu cannot be combined with --swiglu",
       {"--quick-geglu", "--disable-bias-linear"}},
      {109, {"--swiglu", "--glu-linear-offset", "1.0"}, "add --no-bias-swiglu-fusion",
       {"--swiglu", "--glu-linear-offset", "1.0", "--no-bias-swiglu-fusion"}},
      {109, {"--glu-linear-offset", "1.0"}, "--glu-linear-offset=1",
       {"--quick-geglu", "--no-bias-gelu-fusion", "--glu-linear-offset", "1.0", "--activation-func-clamp-value", "7.0"}},
      {111, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-router-enable-expert-bias"}, "needs --moe-router-score-function sigmoid",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-router-enable-expert-bias", "--moe-router-score-function", "sigmoid"}},
      {112, {"--num-experts", "4", "--moe-router-topk", "2", "--moe-router-group-topk", "2"}, "needs --moe-router-num-groups",
       {"--num-experts", "4", "--moe-router-topk", "2", "--moe-router-group-topk", "2", "--moe-router-num-groups", "2"}},
      {115, {"--context-parallel-size", "2", "--cp-comm-type", "p2p", "a2a"}, "one entry per layer",
       {"--context-parallel-size", "2", "--cp-comm-type", "p2p", "a2a", "p2p", "a2a"}, 2},
      {116, {"--no-rope-freq", "3"}, "--no-rope-freq=3 must divide --num-layers=4", {"--no-rope-freq", "2"}},
      {116, {"--no-rope-freq", "[0]*3"}, "pattern length must equal --num-layers=4", {"--no-rope-freq", "[0]*3+[1]"}},
      {117, {"--multi-latent-attention", "--rotary-interleaved"}, "not supported with --multi-latent-attention",
       {"--multi-latent-attention"}},
      {0, {"--multi-latent-attention", "--group-query-attention", "--num-query-groups", "2"},
       "cannot be combined with --group-query-attention", {"--multi-latent-attention"}},
      // Rule 0: mactor's own checks of values Megatron passes on unchecked (config/validate_model.cpp).
      {0, {"--window-size", "128,4"}, "--window-size 128,4 is not causal", {"--window-size", "128,0"}},
      {0, {"--window-size", "128"}, "--window-size takes two values", {"--window-size", "(-1,0)"}},
      {0, {"--window-size", "8,0", "--window-attn-skip-freq", "[1,0]"}, "--window-attn-skip-freq pattern length must equal --num-layers=4",
       {"--window-size", "8,0", "--window-attn-skip-freq", "[1,1,0,0]"}},
      {0, {"--window-size", "8,0", "--window-attn-skip-freq", "0"}, "--window-attn-skip-freq=0 must be a positive layer count",
       {"--window-size", "8,0", "--window-attn-skip-freq", "2"}},
      {0, {"--rotary-seq-len-interpolation-factor", "0"}, "--rotary-seq-len-interpolation-factor=0 must be at least 1",
       {"--rotary-seq-len-interpolation-factor", "4"}},
      {0, {"--use-rope-scaling", "--rope-scaling-factor", "0"}, "--rope-scaling-factor must be positive",
       {"--use-rope-scaling", "--rope-scaling-factor", "32"}},
      {124, {"--num-distributed-optimizer-instances", "3"}, "must be divisible by --num-distributed-optimizer-instances=3",
       {"--num-distributed-optimizer-instances", "2"}, 2},
      {124, {"--num-experts", "4", "--expert-model-parallel-size", "4", "--num-distributed-optimizer-instances", "2"},
       "the expert data-parallel size (world 4 / (--expert-tensor-parallel-size x --expert-model-parallel-size x "
       "--pipeline-model-parallel-size) = 1) must be divisible by --num-distributed-optimizer-instances=2",
       {"--num-experts", "4", "--expert-model-parallel-size", "2", "--num-distributed-optimizer-instances", "2"}, 4},
  };
  return table;
}

}  // namespace

TEST_CASE("each rule rejects its failing case and accepts its passing case") {
  for (const auto& c : cases()) {
    INFO("rule " << c.rule);
    auto bad = run(c.failing, c.world);
    if (c.error.empty()) {
      CHECK(bad.report.ok());
    } else {
      std::string all;
      for (const auto& e : bad.report.errors) all += e + "\n";
      INFO("errors:\n" << all);
      CHECK(bad.has_error(c.error));
    }
    auto good = run(c.passing, c.world);
    std::string all;
    for (const auto& e : good.report.errors) all += e + "\n";
    INFO("passing case errors:\n" << all);
    CHECK(good.report.ok());
  }
}

TEST_CASE("rule 109 companions: bias GeLU fusion is turned off without biases") {
  auto v = run({"--disable-bias-linear"}, 1);
  CHECK(v.report.ok());
  CHECK_FALSE(v.args.training.bias_gelu_fusion);
  CHECK(run({}, 1).args.training.add_qkv_bias);  // rule 57: biases on means the QKV bias too
}

TEST_CASE("rule 17: pretrain_gpt's script default fills --tokenizer-type, a given value wins") {
  CHECK(run({}, 1).args.tokenizer.tokenizer_type == "GPT2BPETokenizer");
  CHECK(run({"--tokenizer-type", "NullTokenizer", "--vocab-size", "10"}, 1).args.tokenizer.tokenizer_type == "NullTokenizer");
}

TEST_CASE("rules 14, 36, 63: derived defaults") {
  auto v = run({"--tensor-model-parallel-size", "2", "--num-experts", "4", "--moe-router-topk", "2", "--disable-bias-linear"}, 2);
  REQUIRE(v.report.ok());
  CHECK(v.args.moe.expert_tensor_parallel_size == 2);
  CHECK(v.args.moe.moe_ffn_hidden_size == v.args.network_size.ffn_hidden_size);
  CHECK(v.args.derived.consumed_train_samples == 0);
  CHECK(run({"--num-experts", "0"}, 1).args.moe.num_experts == std::nullopt);
}
