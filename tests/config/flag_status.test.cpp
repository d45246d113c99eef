// The support table: every flag has a status, and setting an unsupported one is an error naming it.
#include <catch2/catch.hpp>

#include "config/flag_status.hpp"
#include "config/flag_table.hpp"
#include "config/parser.hpp"

using namespace mactor::config;

TEST_CASE("the table lists every flag once with a status and a reason") {
  const auto table = flag_status_table();
  std::size_t lines = 0;
  for (char c : table) lines += c == '\n';
  CHECK(lines == flag_specs().size() + 1);
  CHECK(flag_specs().size() == 565);
  CHECK(table.rfind("flag\tgroup\tstatus\treason\n", 0) == 0);
  CHECK(table.find("--use-flash-attn\ttraining\taccepted without effect\t") != std::string::npos);
}

TEST_CASE("a not-implemented flag at a non-default value is an error naming it") {
  REQUIRE(support_of("retro_add_retriever").status == support::not_implemented);
  const std::vector<std::string> words{"--retro-add-retriever"};
  auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  REQUIRE(report.errors.size() == 1);
  CHECK(report.errors[0] == "--retro-add-retriever is recognized but not implemented by mactor yet");
}

TEST_CASE("a flag given at its default value is no error") {
  const std::vector<std::string> words{"--retro-num-neighbors", "2"};  // Megatron's default is 2
  CHECK(check_support(parse_command_line(words, "pretrain_gpt").args).errors.empty());
}

TEST_CASE("an accepted-without-effect flag gives one warning line") {
  const std::vector<std::string> words{"--use-flash-attn", "--no-masked-softmax-fusion"};
  auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  REQUIRE(report.warnings.size() == 2);
  CHECK(report.warnings[0].rfind("WARNING: --no-masked-softmax-fusion is accepted without effect", 0) == 0);
}

TEST_CASE("the cp-comm-type flag and the hierarchical split are implemented and --vocab-extra-ids warns") {
  const std::vector<std::string> words{"--context-parallel-size", "2", "--cp-comm-type", "a2a+p2p",
                                       "--hierarchical-context-parallel-sizes", "2", "1", "--vocab-extra-ids", "100"};
  auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  CHECK(support_of("cp_comm_type").status == support::implemented);
  CHECK(support_of("hierarchical_context_parallel_sizes").status == support::implemented);
  REQUIRE(report.warnings.size() == 1);
  CHECK(report.warnings[0].rfind("WARNING: --vocab-extra-ids is accepted without effect", 0) == 0);
}

TEST_CASE("the wandb flags are implemented") {
  const std::vector<std::string> words{"--wandb-project", "p", "--wandb-exp-name", "e", "--wandb-entity", "t", "--wandb-save-dir", "d"};
  auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  CHECK(support_of("wandb_save_dir").status == support::implemented);
}

TEST_CASE("the query/key L2 norm (--qk-l2-norm) is implemented") {
  const std::vector<std::string> words{"--qk-l2-norm"};
  auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  CHECK(support_of("qk_l2_norm").status == support::implemented);
}

TEST_CASE("the timing flags are implemented") {
  const std::vector<std::string> words{"--timing-log-level", "2", "--timing-log-option", "all", "--log-timers-to-tensorboard"};
  const auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  CHECK(report.warnings.empty());
}

TEST_CASE("a program holding only some flags to the table hears nothing of the others") {
  const std::vector<std::string> words{"--retro-add-retriever", "--use-flash-attn", "--decode-only-cuda-graphs"};
  const auto args = parse_command_line(words, "pretrain_gpt").args;
  const auto report = check_support(args, [](std::string_view dest) { return dest == "decode_only_cuda_graphs"; });
  REQUIRE(report.errors.size() == 1);
  CHECK(report.errors[0] == "--decode-only-cuda-graphs is recognized but not implemented by mactor yet");
  CHECK(report.warnings.empty());
  CHECK(check_support(args).errors.size() == 2);
}

TEST_CASE("the rerun state machine's flags are implemented, report_stats refused") {
  const std::vector<std::string> words{"--rerun-mode", "disabled", "--error-injection-rate", "100", "--error-injection-type",
                                       "persistent_error", "--check-for-spiky-loss", "--no-check-for-nan-in-loss-and-grad",
                                       "--result-rejected-tracker-filename", "t.txt", "--check-for-large-grads"};
  const auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  CHECK(report.warnings.empty());
  const std::vector<std::string> stats{"--rerun-mode", "report_stats"};
  const auto refused = check_support(parse_command_line(stats, "pretrain_gpt").args);
  REQUIRE(refused.errors.size() == 1);
  CHECK(refused.errors[0] ==
        "--rerun-mode report_stats is recognized but not implemented by mactor yet (implemented: disabled, validate_results)");
}

TEST_CASE("the MoE flags of one expert-parallel rank are implemented") {
  const std::vector<std::string> words{"--num-experts", "8", "--disable-bias-linear", "--moe-router-topk", "2", "--num-layers", "4",
                                       "--moe-ffn-hidden-size", "32", "--moe-layer-freq", "([0]*1+[1]*3)",
                                       "--moe-router-pre-softmax", "--moe-router-topk-scaling-factor", "2.5",
                                       "--moe-router-load-balancing-type", "seq_aux_loss", "--moe-aux-loss-coeff", "0.01",
                                       "--moe-z-loss-coeff", "0.001", "--moe-grouped-gemm",
                                       "--moe-token-dispatcher-type", "alltoall"};
  const auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
  CHECK(report.errors.empty());
  CHECK(report.warnings.empty());
}

TEST_CASE("MoE with tensor parallelism but no sequence parallelism or with router noise, expert biases, fp8 or a missing layer in --moe-layer-freq is refused by name") {
  auto errors_of = [](std::vector<std::string> words) {
    return check_support(parse_command_line(words, "pretrain_gpt").args).errors;
  };
  auto has = [](const std::vector<std::string>& errors, const std::string& text) {
    for (const auto& e : errors)
      if (e.find(text) != std::string::npos) return true;
    return false;
  };
  const auto tp = errors_of({"--num-experts", "8", "--disable-bias-linear", "--tensor-model-parallel-size", "2"});
  REQUIRE(tp.size() == 1);
  CHECK(has(tp, "--num-experts with --tensor-model-parallel-size 2 needs --sequence-parallel"));
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--tensor-model-parallel-size", "2", "--sequence-parallel"}).empty());
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--tensor-model-parallel-size", "2", "--sequence-parallel",
                   "--expert-tensor-parallel-size", "1"}).empty());
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--tensor-model-parallel-size", "4", "--sequence-parallel",
                   "--expert-tensor-parallel-size", "2"}).empty());
  // ZeRO-3 shards the experts over their own group (expert-tensor- or expert-parallel).
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--tensor-model-parallel-size", "2", "--sequence-parallel",
                   "--expert-tensor-parallel-size", "1", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                   "optim_grads_params"}).empty());
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--expert-model-parallel-size", "2", "--use-megatron-fsdp",
                   "--data-parallel-sharding-strategy", "optim_grads_params"}).empty());
  CHECK(has(errors_of({"--num-experts", "8", "--disable-bias-linear", "--tensor-model-parallel-size", "2", "--sequence-parallel",
                       "--moe-input-jitter-eps", "0.1"}),
            "--moe-router-force-load-balancing is recognized but not implemented"));
  CHECK(has(errors_of({"--num-experts", "8"}), "add --disable-bias-linear"));
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--context-parallel-size", "2"}).empty());
  CHECK(has(errors_of({"--num-experts", "8", "--disable-bias-linear", "--context-parallel-size", "2", "--moe-input-jitter-eps", "0.1"}),
            "--moe-input-jitter-eps or --moe-router-force-load-balancing is recognized but not implemented"));
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--fp8-format", "hybrid"}).empty());
  CHECK(has(errors_of({"--num-experts", "8", "--disable-bias-linear", "--fp8-format", "hybrid", "--fp8-param-gather", "--bf16",
                       "--use-distributed-optimizer"}),
            "--num-experts with --fp8-param-gather is recognized but not implemented by mactor yet"));
  // Padding to capacity changes nothing but fp8's scales.
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--moe-expert-capacity-factor", "1.0",
                   "--moe-pad-expert-input-to-capacity"}).empty());
  CHECK(has(errors_of({"--num-experts", "8", "--disable-bias-linear", "--moe-expert-capacity-factor", "1.0",
                       "--moe-pad-expert-input-to-capacity", "--fp8-format", "hybrid"}),
            "--moe-pad-expert-input-to-capacity with --fp8-format is recognized but not implemented by mactor yet"));
  CHECK(has(errors_of({"--num-experts", "8", "--disable-bias-linear", "--num-layers", "4", "--moe-layer-freq", "[1,0,1]"}),
            "--moe-layer-freq lists 3 layers"));
  CHECK(errors_of({"--num-experts", "8", "--disable-bias-linear", "--num-layers", "3", "--moe-layer-freq", "[1,0,1]"}).empty());
}

TEST_CASE("MoE dispatchers mactor does not build are refused by value and every load-balancing type is built") {
  auto errors_of = [](std::vector<std::string> words) {
    words.insert(words.end(), {"--num-experts", "8", "--disable-bias-linear"});
    return check_support(parse_command_line(words, "pretrain_gpt").args).errors;
  };
  CHECK(errors_of({"--moe-router-load-balancing-type", "global_aux_loss"}).empty());
  // The list form: each entry must be implemented.
  CHECK(errors_of({"--moe-router-load-balancing-type", "aux_loss", "seq_aux_loss", "--moe-aux-loss-coeff", "0.1", "0.1"}).empty());
  CHECK(errors_of({"--moe-router-load-balancing-type", "seq_aux_loss", "global_aux_loss", "--moe-aux-loss-coeff", "0.1", "0.1"}).empty());
  CHECK(errors_of({"--moe-router-load-balancing-type", "sinkhorn"}).empty());
  CHECK(errors_of({"--moe-token-dispatcher-type", "flex", "--moe-enable-deepep"}).empty());
  CHECK(errors_of({"--moe-router-load-balancing-type", "none"}).empty());
  CHECK(errors_of({"--moe-expert-capacity-factor", "1.5", "--moe-token-drop-policy", "position"}).empty());
  CHECK(errors_of({"--moe-router-score-function", "sigmoid", "--moe-router-num-groups", "4", "--moe-router-group-topk", "2"}).empty());
  CHECK(errors_of({"--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias"}).empty());
  CHECK(errors_of({"--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias", "--ckpt-format", "torch"}).size() == 1);
  CHECK(errors_of({"--expert-model-parallel-size", "2"}).empty());
  CHECK(errors_of({"--expert-model-parallel-size", "2", "--use-distributed-optimizer",
                   "--num-distributed-optimizer-instances", "2"}).empty());
  CHECK(errors_of({"--expert-tensor-parallel-size", "1", "--use-distributed-optimizer",
                   "--num-distributed-optimizer-instances", "2"}).empty());
}

TEST_CASE("the multi-latent attention flags are implemented (with cp and fp8 too), and MLA with a softmax variant and --cache-mla-latents are refused by name") {
  auto errors_of = [](std::vector<std::string> words) {
    return check_support(parse_command_line(words, "pretrain_gpt").args).errors;
  };
  const std::vector<std::string> mla{"--multi-latent-attention", "--q-lora-rank", "16", "--kv-lora-rank", "8", "--qk-head-dim", "8",
                                     "--qk-pos-emb-head-dim", "4", "--v-head-dim", "8", "--rope-type", "yarn",
                                     "--rotary-scaling-factor", "40", "--mscale", "0.7", "--mscale-all-dim", "0.7"};
  CHECK(errors_of(mla).empty());
  auto with = [&](std::vector<std::string> more) {
    auto words = mla;
    words.insert(words.end(), more.begin(), more.end());
    const auto errors = errors_of(words);
    REQUIRE(errors.size() == 1);
    return errors[0];
  };
  CHECK(errors_of({"--multi-latent-attention", "--context-parallel-size", "2"}).empty());
  auto fp8 = mla;
  fp8.insert(fp8.end(), {"--fp8-format", "hybrid"});
  CHECK(errors_of(fp8).empty());
  CHECK(with({"--softmax-type", "learnable"}).find("drop --softmax-type") != std::string::npos);
  CHECK(with({"--cache-mla-latents"}).rfind("--cache-mla-latents is recognized but not implemented by mactor yet: caches", 0) == 0);
}

TEST_CASE("fp8 param gather (--fp8-param-gather) is implemented for per-tensor recipes on a 16-bit model, refused by name otherwise") {
  auto errors_of = [](std::vector<std::string> words) {
    return check_support(parse_command_line(words, "pretrain_gpt").args).errors;
  };
  CHECK(support_of("fp8_param_gather").status == support::implemented);
  const std::vector<std::string> base{"--fp8-format", "hybrid", "--fp8-param-gather", "--use-distributed-optimizer"};
  auto with = [&](std::vector<std::string> extra) {
    auto w = base;
    w.insert(w.end(), extra.begin(), extra.end());
    return w;
  };
  CHECK(errors_of(with({"--bf16"})).empty());
  CHECK(errors_of(with({"--fp16", "--fp8-recipe", "tensorwise"})).empty());
  for (const std::string recipe : {"mxfp8", "blockwise"}) {
    const auto e = errors_of(with({"--bf16", "--fp8-recipe", recipe}));
    REQUIRE(e.size() == 1);
    CHECK(e[0].find("--fp8-param-gather with --fp8-recipe " + recipe + " is recognized but not implemented") == 0);
  }
  const auto fp32 = errors_of(base);
  REQUIRE(fp32.size() == 1);
  CHECK(fp32[0].find("add --bf16") != std::string::npos);
}

TEST_CASE("fp16 main params (--main-params-dtype fp16) are implemented, refused with --fp8-param-gather") {
  auto errors_of = [](std::vector<std::string> words) {
    return check_support(parse_command_line(words, "pretrain_gpt").args).errors;
  };
  const std::vector<std::string> base{"--bf16", "--use-distributed-optimizer", "--use-precision-aware-optimizer",
                                      "--main-params-dtype", "fp16"};
  CHECK(errors_of(base).empty());
  auto pg = base;
  for (const char* w : {"--fp8-format", "hybrid", "--fp8-param-gather"}) pg.emplace_back(w);
  const auto e = errors_of(pg);
  REQUIRE(e.size() == 1);
  CHECK(e[0].find("--fp8-param-gather with --main-params-dtype fp16 is recognized but not implemented") == 0);
}

TEST_CASE("non-persistent checkpoints: global and local implemented, an interval without a type refused") {
  auto support = [](std::vector<std::string> words) { return check_support(parse_command_line(words, "pretrain_gpt").args); };
  CHECK(support({"--non-persistent-save-interval", "5", "--non-persistent-ckpt-type", "global",
                 "--non-persistent-global-ckpt-dir", "/tmp/x"}).errors.empty());
  const auto untyped = support({"--non-persistent-save-interval", "5"});
  REQUIRE(untyped.errors.size() == 1);
  CHECK(untyped.errors[0].find("--non-persistent-save-interval needs --non-persistent-ckpt-type global or local") == 0);
  CHECK(support({"--non-persistent-save-interval", "5", "--non-persistent-ckpt-type", "local",
                 "--non-persistent-local-ckpt-dir", "/tmp/x", "--non-persistent-local-ckpt-algo", "atomic"})
            .errors.empty());
}

TEST_CASE("multi-token prediction is implemented and its unbuilt combinations are refused naming the fix") {
  const std::vector<std::string> mtp{"--mtp-num-layers", "2", "--mtp-loss-scaling-factor", "0.3",
                                     "--position-embedding-type", "rope"};
  CHECK(check_support(parse_command_line(mtp, "pretrain_gpt").args).errors.empty());
  const auto refused = [&](std::vector<std::string> extra, const std::string& what) {
    auto words = mtp;
    words.insert(words.end(), extra.begin(), extra.end());
    const auto report = check_support(parse_command_line(words, "pretrain_gpt").args);
    std::size_t named = 0;
    for (const auto& e : report.errors)
      if (e.rfind("--mtp-num-layers with " + what, 0) == 0 && e.find("is recognized but not implemented") != std::string::npos)
        ++named;
    INFO(what);
    CHECK(named == 1);
  };
  {  // context parallelism rolls over the whole sequence
    auto words = mtp;
    words.insert(words.end(), {"--context-parallel-size", "2"});
    CHECK(check_support(parse_command_line(words, "pretrain_gpt").args).errors.empty());
  }
  {  // fp8 depths are built
    auto words = mtp;
    words.insert(words.end(), {"--fp8-format", "hybrid"});
    CHECK(check_support(parse_command_line(words, "pretrain_gpt").args).errors.empty());
  }
  {  // MoE depths are built
    auto words = mtp;
    words.insert(words.end(), {"--num-experts", "4", "--disable-bias-linear"});
    CHECK(check_support(parse_command_line(words, "pretrain_gpt").args).errors.empty());
  }
  {  // per-token loss is built: each depth's sum
    auto words = mtp;
    words.insert(words.end(), {"--calculate-per-token-loss"});
    CHECK(check_support(parse_command_line(words, "pretrain_gpt").args).errors.empty());
  }
  refused({"--bf16", "--fp32-residual-connection"}, "--fp32-residual-connection");
  // Untied embeddings are built on one stage and over stages (the last holds a copy of the table).
  auto untied = mtp;
  untied.push_back("--untie-embeddings-and-output-weights");
  CHECK(check_support(parse_command_line(untied, "pretrain_gpt").args).errors.empty());
  untied.insert(untied.end(), {"--pipeline-model-parallel-size", "2"});
  CHECK(check_support(parse_command_line(untied, "pretrain_gpt").args).errors.empty());
  // ... and with FSDP's sharded gradients, which sum that copy over the stages on their slices
  // (tests/training/fsdp_launch.test.cpp runs it).
  untied.insert(untied.end(), {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--data-parallel-sharding-strategy",
                               "optim_grads"});
  CHECK(check_support(parse_command_line(untied, "pretrain_gpt").args).errors.empty());
}
