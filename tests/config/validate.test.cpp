// Megatron's validation rules: each with a passing and a failing case (rule numbers from validation.md).
#include <catch2/catch.hpp>

#include "config_test_support.hpp"

using namespace mactor::config;
using namespace mactor::config::testing;

TEST_CASE("the base configuration is valid") {
  auto v = with_base({});
  INFO((v.report.errors.empty() ? std::string() : v.report.errors.front()));
  CHECK(v.report.ok());
  CHECK(v.args.derived.num_microbatches == 4);
}

TEST_CASE("rule 8/11: world size must be a multiple of tp*pp*cp, and dp is the rest") {
  auto bad = with_base({"--tensor-model-parallel-size", "4"}, 6);
  CHECK(bad.has_error("world size 6 is not divisible by --tensor-model-parallel-size=4"));
  CHECK(bad.has_error("1, 2, 3 or 6"));
  auto good = with_base({"--tensor-model-parallel-size", "2"}, 8);
  CHECK(good.report.ok());
  CHECK(good.args.derived.data_parallel_size == 4);
  CHECK(replica_size(good.args) == 2);
  CHECK(replica_size(with_base({"--tensor-model-parallel-size", "2", "--context-parallel-size", "2"}, 8).args) == 4);
}

TEST_CASE("rule 15: removed flags are refused, and --recompute-activations means selective") {
  CHECK(with_base({"--batch-size", "4"}).has_error("--batch-size argument is no longer valid"));
  CHECK(with_base({"--checkpoint-activations"}).has_error("--checkpoint-activations is no longer valid"));
  auto v = with_base({"--recompute-activations"});
  CHECK(v.report.ok());
  CHECK(v.args.training.recompute_granularity == "selective");
}

TEST_CASE("rule 16: deprecated CUDA-graph switches map to --cuda-graph-impl") {
  auto v = with_base({"--enable-cuda-graph"});
  CHECK(v.args.inference.cuda_graph_impl == "local");
  CHECK(with_base({"--enable-cuda-graph", "--cuda-graph-impl", "local"}).has_error("do not use --enable-cuda-graph"));
  CHECK(!v.args.inference.enable_cuda_graph);  // validate_args deletes it once mapped
}

TEST_CASE("rule 81: CUDA graphs turn on the Transformer Engine RNG tracker") {
  CHECK(!with_base({}).args.transformer_engine.te_rng_tracker);
  const auto v = with_base({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn"});
  CHECK(v.report.ok());
  CHECK(v.args.transformer_engine.te_rng_tracker);
  CHECK(!with_base({"--cuda-graph-impl", "local", "--transformer-impl", "local"}).args.transformer_engine.te_rng_tracker);
}

TEST_CASE("rule 18/19/68: data sources") {
  auto flags = base_flags();
  flags.erase(std::find(flags.begin(), flags.end(), "--mock-data"));
  flags.insert(flags.end(), {"--data-path", "corpus"});
  auto v = validate_flags(flags);
  CHECK(v.report.ok());
  CHECK(v.args.data.split == "969, 30, 1");
  CHECK(v.has_warning("Please specify --split"));
  CHECK(with_base({"--data-path", "x"}).has_error("a single data source must be provided"));
  CHECK(with_base({"--data-args-path", "a", "--data-path", "b"}).has_error("mutually exclusive"));
}

TEST_CASE("rule 20: micro batch size is required, and the global batch defaults to mbs*dp") {
  auto flags = base_flags();
  auto it = std::find(flags.begin(), flags.end(), "--global-batch-size");
  flags.erase(it, it + 2);
  auto v = validate_flags(flags, 4);
  CHECK(v.args.training.global_batch_size == 8);
  CHECK(with_base({"--micro-batch-size", "0"}).has_error("--micro-batch-size=0 must be > 0"));
}

TEST_CASE("rules 21-24: virtual pipeline sizes") {
  auto vp = with_base({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"}, 2);
  CHECK(vp.report.ok());
  CHECK(vp.args.derived.virtual_pipeline_model_parallel_size == 2);
  CHECK(with_base({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "3"}, 2)
            .has_error("must be divisible by --num-layers-per-virtual-pipeline-stage=3"));
  CHECK(with_base({"--num-layers-per-virtual-pipeline-stage", "1", "--num-virtual-stages-per-pipeline-rank", "2"})
            .has_error("no more than one of"));
  CHECK(with_base({"--pipeline-model-parallel-size", "3"}, 3).has_error("number of layers (4) is not divisible"));
  auto one = with_base({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "2"}, 2);
  CHECK_FALSE(one.args.derived.virtual_pipeline_model_parallel_size.has_value());  // vp == 1 becomes None
}

TEST_CASE("rule 25: interleaving needs pp > 2 without p2p overlap, and overlap is off without interleaving") {
  CHECK(with_base({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
                   "--no-overlap-p2p-communication"}, 2)
            .has_error("pipeline-model-parallel size should be greater than 2"));
  auto v = with_base({});
  CHECK_FALSE(v.args.distributed.overlap_p2p_comm);
}

TEST_CASE("rule 26: parameter-gather overlap needs the distributed optimizer and grad-reduce overlap") {
  CHECK(with_base({"--overlap-param-gather"}).has_error("--use-distributed-optimizer"));
  CHECK(with_base({"--overlap-param-gather", "--use-distributed-optimizer", "--overlap-grad-reduce"}).report.ok());
}

TEST_CASE("rule 33: precision sets params_dtype, and fp16 and bf16 exclude each other") {
  auto h = with_base({"--fp16"});
  CHECK(h.args.derived.params_dtype == "float16");
  CHECK_FALSE(h.args.training.check_for_nan_in_loss_and_grad);
  CHECK(with_base({"--bf16"}).args.mixed_precision.accumulate_allreduce_grads_in_fp32);
  CHECK(with_base({"--fp16", "--bf16"}).has_error("--fp16 and --bf16 cannot both be set"));
}

TEST_CASE("rules 37/38: iteration- and sample-based training do not mix") {
  CHECK(with_base({"--train-samples", "100"}).has_error("--train-iters and --train-samples cannot both be set"));
  CHECK(with_base({"--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "2"}).has_error("--lr-warmup-fraction and --lr-warmup-iters"));
  CHECK(with_base({"--lr-warmup-fraction", "0.1"}).report.ok());
}

TEST_CASE("rule 40: the model shape flags are required") {
  auto flags = base_flags();
  auto it = std::find(flags.begin(), flags.end(), "--hidden-size");
  flags.erase(it, it + 2);
  CHECK(validate_flags(flags).has_error("--hidden-size is required"));
}

TEST_CASE("rule 41/42: ffn hidden size and kv channels defaults") {
  CHECK(with_base({"--hidden-size", "512", "--swiglu"}).args.network_size.ffn_hidden_size == 1344);
  CHECK(with_base({"--hidden-size", "1024", "--swiglu"}).args.network_size.ffn_hidden_size == 2688);
  CHECK(with_base({}).args.network_size.ffn_hidden_size == 256);
  CHECK(with_base({}).args.network_size.kv_channels == 16);
  CHECK(with_base({"--num-attention-heads", "6"}).has_error("--hidden-size=64 is not divisible by --num-attention-heads=6"));
  CHECK(with_base({"--num-attention-heads", "6", "--kv-channels", "8"}).report.ok());
}

TEST_CASE("rules 43-45: sequence length") {
  CHECK(with_base({"--context-parallel-size", "2", "--seq-length", "30", "--max-position-embeddings", "30"}, 2)
            .has_error("must be divisible by 2 x --context-parallel-size=4"));
  CHECK(with_base({"--seq-length", "64"}).has_error("--max-position-embeddings=32 must be >= --seq-length=64"));
  CHECK(with_base({"--context-parallel-size", "2"}, 2).report.ok());
}

TEST_CASE("a2a+p2p attention takes two hierarchical sizes, the first dividing the query groups per tensor-parallel rank") {
  const std::vector<std::string> cp8{"--context-parallel-size", "8", "--cp-comm-type", "a2a+p2p", "--seq-length", "32",
                                     "--group-query-attention", "--num-query-groups", "2"};
  auto with = [&](std::initializer_list<std::string> extra) {
    auto flags = base_flags();
    flags.insert(flags.end(), cp8.begin(), cp8.end());
    flags.insert(flags.end(), extra.begin(), extra.end());
    return validate_flags(flags, 8);
  };
  CHECK(with({"--hierarchical-context-parallel-sizes", "2", "4"}).report.ok());
  CHECK(with({"--hierarchical-context-parallel-sizes", "4", "2"})
            .has_error("--cp-comm-type a2a+p2p needs the query groups per tensor-parallel rank (2) divisible by the first "
                       "of --hierarchical-context-parallel-sizes=4"));
  CHECK(with({"--hierarchical-context-parallel-sizes", "2", "2", "2"})
            .has_error("--cp-comm-type a2a+p2p takes two --hierarchical-context-parallel-sizes"));
}

TEST_CASE("rules 46/47: learning rate floor and save interval") {
  CHECK(with_base({"--min-lr", "0.1"}).has_error("--min-lr=0.1 must be <= --lr=0.001"));
  CHECK(with_base({"--save", "ckpt"}).has_error("--save needs --save-interval"));
  CHECK(with_base({"--save", "ckpt", "--save-interval", "5"}).report.ok());
}

TEST_CASE("rule 48/50: fp16 cross entropy and weight-decay increments") {
  CHECK(with_base({"--fp16-lm-cross-entropy"}).has_error("only support in fp16 model"));
  CHECK(with_base({"--weight-decay-incr-style", "linear"}).has_error("needs --start-weight-decay and --end-weight-decay"));
  auto v = with_base({"--weight-decay", "0.1"});
  CHECK(v.args.regularization.start_weight_decay == 0.1);
  CHECK(v.args.regularization.end_weight_decay == 0.1);
}

TEST_CASE("rule 54: sequence parallelism is turned off without tensor parallelism") {
  auto v = with_base({"--sequence-parallel"});
  CHECK(v.report.ok());
  CHECK_FALSE(v.args.training.sequence_parallel);
  CHECK(v.has_warning("Disabling sequence parallelism"));
  CHECK(with_base({"--sequence-parallel", "--tensor-model-parallel-size", "2"}, 2).args.training.sequence_parallel);
}

TEST_CASE("sequence parallelism needs a sequence length that splits over the tensor-parallel ranks") {
  auto bad = with_base({"--sequence-parallel", "--tensor-model-parallel-size", "4", "--seq-length", "6"}, 4);
  CHECK(bad.has_error("--seq-length=6 is not divisible by --tensor-model-parallel-size=4 with --sequence-parallel"));
  CHECK(with_base({"--tensor-model-parallel-size", "4", "--seq-length", "6"}, 4).report.ok());
  CHECK(with_base({"--sequence-parallel", "--tensor-model-parallel-size", "4", "--seq-length", "8"}, 4).report.ok());
}

TEST_CASE("rules 57/60: bias and rotary switches") {
  CHECK_FALSE(with_base({"--disable-bias-linear"}).args.training.bias_gelu_fusion);
  CHECK(with_base({"--use-rotary-position-embeddings"}).args.network_size.position_embedding_type == "rope");
  CHECK(with_base({"--no-position-embedding"}).has_error("--no-position-embedding is deprecated"));
  CHECK(with_base({"--no-position-embedding", "--position-embedding-type", "rope"}).report.ok());
}

TEST_CASE("rule 65: expert parallelism needs experts that divide") {
  CHECK(with_base({"--expert-model-parallel-size", "2"}, 2).has_error("needs --num-experts"));
  CHECK(with_base({"--expert-model-parallel-size", "2", "--num-experts", "3"}, 2).has_error("must be divisible"));
  CHECK(with_base({"--expert-model-parallel-size", "2", "--num-experts", "4", "--moe-router-topk", "2"}, 2).report.ok());
}

TEST_CASE("rules 95/96: heads and query groups divide over tensor parallelism") {
  auto heads = with_base({"--tensor-model-parallel-size", "3", "--num-attention-heads", "4"}, 3);
  CHECK(heads.has_error("--num-attention-heads=4 is not divisible by --tensor-model-parallel-size=3"));
  CHECK(heads.has_error("try 1, 2 or 4"));
  CHECK(with_base({"--tensor-model-parallel-size", "2", "--group-query-attention", "--num-query-groups", "1"}, 2)
            .has_error("--num-query-groups=1 is not divisible by --tensor-model-parallel-size=2"));
  CHECK(with_base({"--tensor-model-parallel-size", "2", "--group-query-attention", "--num-query-groups", "2"}, 2).report.ok());
}

TEST_CASE("rule 103: full recompute needs a method and a layer count") {
  CHECK(with_base({"--recompute-granularity", "full"}).has_error("needs --recompute-method"));
  CHECK(with_base({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"}).report.ok());
  CHECK(with_base({"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "0"}).has_error("--recompute-num-layers must be at least 1"));
}

TEST_CASE("the router's top-k must pick among the experts") {
  CHECK(with_base({"--num-experts", "4", "--moe-router-topk", "5"}).has_error("--moe-router-topk=5 must lie in [1, --num-experts=4]"));
  CHECK(with_base({"--num-experts", "4", "--moe-router-topk", "4"}).report.ok());
}

TEST_CASE("rule 112: top-1 softmax routing needs pre-softmax") {
  CHECK(with_base({"--num-experts", "4", "--moe-router-topk", "1"}).has_error("--moe-router-pre-softmax"));
  CHECK(with_base({"--num-experts", "4", "--moe-router-topk", "1", "--moe-router-pre-softmax"}).report.ok());
}

TEST_CASE("rule 114: the expert all-to-all overlap needs expert parallelism, 16-bit, virtual stages with pipelining and no layer recompute") {
  const std::vector<std::string> moe = {"--num-experts", "4", "--moe-router-topk", "2", "--expert-model-parallel-size", "2",
                                        "--moe-token-dispatcher-type", "alltoall", "--overlap-moe-expert-parallel-comm"};
  auto with = [&](std::vector<std::string> extra, int world) {
    auto flags = base_flags();
    flags.insert(flags.end(), moe.begin(), moe.end());
    flags.insert(flags.end(), extra.begin(), extra.end());
    return validate_flags(flags, world);
  };
  CHECK(with({}, 2).has_error("--overlap-moe-expert-parallel-comm needs --bf16 or --fp16"));
  CHECK(with({"--bf16"}, 2).report.ok());
  CHECK(with({"--bf16", "--pipeline-model-parallel-size", "2"}, 4).has_error("needs virtual pipeline stages"));
  CHECK(with({"--bf16", "--recompute-granularity", "full", "--recompute-method", "uniform"}, 2)
            .has_error("cannot be combined with --recompute-granularity full"));
  CHECK(with({"--bf16", "--moe-shared-expert-intermediate-size", "32", "--moe-shared-expert-overlap"}, 2)
            .has_error("cannot be combined with --moe-shared-expert-overlap"));
  // mactor's own schedules: the combined 1F1B order exists only without pipelining or interleaved.
  const std::vector<std::string> v_schedule = {"--bf16", "--pipeline-model-parallel-size", "2",
                                               "--num-virtual-stages-per-pipeline-rank", "2", "--pipeline-schedule"};
  auto under = [&](const std::string& name) {
    auto extra = v_schedule;
    extra.push_back(name);
    return with(extra, 4);
  };
  CHECK(under("zbv").has_error("cannot run under --pipeline-schedule zbv"));
  CHECK(under("interleaved-1f1b").report.ok());
}

TEST_CASE("rule 118: the global batch must split into whole microbatches") {
  auto v = with_base({"--global-batch-size", "7"});
  CHECK(v.has_error("--global-batch-size=7 is not divisible by --micro-batch-size=2 x data-parallel size 1 = 2"));
  CHECK(with_base({"--global-batch-size", "10"}, 3).has_error("data-parallel size 3 = 6"));
  CHECK(with_base({"--global-batch-size", "12"}, 3).args.derived.num_microbatches == 2);
}

TEST_CASE("rule 119: ramp-up values are checked") {
  auto flags = base_flags();
  auto it = std::find(flags.begin(), flags.end(), "--train-iters");
  flags.erase(it, it + 2);
  auto ramp = [&](std::initializer_list<std::string> extra) {
    auto f = flags;
    f.insert(f.end(), extra.begin(), extra.end());
    return validate_flags(f);
  };
  CHECK(ramp({"--train-samples", "1000", "--rampup-batch-size", "2", "2", "100"}).report.ok());
  CHECK(ramp({"--train-samples", "1000", "--rampup-batch-size", "2", "4"}).has_error("expects 3 values"));
  CHECK(ramp({"--train-samples", "1000", "--rampup-batch-size", "2", "4", "100"}).has_error("must be a multiple of the increment"));
  CHECK(ramp({"--train-samples", "1000", "--rampup-batch-size", "8", "2", "100"}).has_error("must be larger than"));
}

TEST_CASE("rule 121/127: interleaving needs pp > 1 and a valid microbatch group") {
  CHECK(with_base({"--num-virtual-stages-per-pipeline-rank", "2"}).has_error("pipeline-model-parallel size should be greater than 1"));
  // pp 2, vp 2, m = 3 microbatches with group 2: 3 % 2 = 1 < pp.
  CHECK(with_base({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
                   "--global-batch-size", "6"}, 2)
            .has_error("modulo the microbatch group size"));
  CHECK(with_base({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2"}, 2).report.ok());
}

TEST_CASE("rule 128: sample-based training length in iterations") {
  auto flags = base_flags();
  auto it = std::find(flags.begin(), flags.end(), "--train-iters");
  flags.erase(it, it + 2);
  flags.insert(flags.end(), {"--train-samples", "100"});
  CHECK(validate_flags(flags).args.training.train_iters == 12);
}

TEST_CASE("rules 129/130: the LR scheduler's inputs") {
  auto flags = base_flags();
  auto it = std::find(flags.begin(), flags.end(), "--lr");
  flags.erase(it, it + 2);
  CHECK(validate_flags(flags).has_error("--lr is required"));
  CHECK(with_base({"--lr-warmup-iters", "10"}).has_error("LR warmup (80 samples) must be shorter than LR decay (80 samples)"));
  CHECK(with_base({"--lr-decay-style", "WSD"}).has_error("--lr-wsd-decay-iters"));
  CHECK(with_base({"--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "2"}).report.ok());
  CHECK(with_base({"--override-opt-param-scheduler", "--use-checkpoint-opt-param-scheduler"}).has_error("give only one"));
}

TEST_CASE("rule 133: the vocabulary is padded to a multiple of divisible-by x tp") {
  auto v = with_base({"--tokenizer-type", "NullTokenizer", "--vocab-size", "1000"});
  CHECK(v.args.tokenizer.padded_vocab_size == 1024);
  auto tp = with_base({"--tokenizer-type", "NullTokenizer", "--vocab-size", "1000", "--tensor-model-parallel-size", "4"}, 4);
  CHECK(tp.args.tokenizer.padded_vocab_size == 1024);
  CHECK(padded_vocab_size(50257, tp.args) == 50688);
  CHECK(padded_vocab_size(50257, v.args) == 50304);
}

TEST_CASE("every violation is reported in one pass") {
  auto v = with_base({"--global-batch-size", "7", "--min-lr", "1", "--seq-length", "64"});
  CHECK(v.report.errors.size() >= 3);
}

TEST_CASE("profile flags: the window must hold an iteration and the ranks must be the job's") {
  CHECK(with_base({"--profile", "--profile-step-start", "2", "--profile-step-end", "4", "--profile-ranks", "0", "3"}, 4)
            .report.ok());
  CHECK(with_base({"--profile", "--profile-step-start", "4", "--profile-step-end", "4"})
            .has_error("--profile-step-end (4) must be greater than --profile-step-start (4)"));
  CHECK(with_base({"--profile", "--profile-step-start", "-1"}).has_error("--profile-step-start must be >= 0"));
  CHECK(with_base({"--profile", "--profile-ranks", "0", "4"}, 4).has_error("--profile-ranks 4 is not a rank of this job (ranks 0..3)"));
  CHECK(with_base({"--profile", "--profile-ranks", "-1"}, 2).has_error("--profile-ranks -1 is not a rank of this job"));
  // Without --profile Megatron reads none of them.
  CHECK(with_base({"--profile-step-end", "1", "--profile-ranks", "9"}).report.ok());
  CHECK(with_base({"--use-pytorch-profiler"}).has_warning("--use-pytorch-profiler has no effect without --profile"));
  CHECK(with_base({"--profile", "--train-iters", "5"}).has_warning("the profiled iterations start at 11, after the last"));
  CHECK(with_base({"--profile", "--use-pytorch-profiler", "--train-iters", "10"}).report.warnings.empty());
}
