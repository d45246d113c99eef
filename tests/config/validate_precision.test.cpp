// The precision-aware optimizer and gradient-buffer flags: Megatron-Core OptimizerConfig's
// checks, rule 33's derived accumulate_allreduce_grads_in_fp32, and which values are supported.
#include <catch2/catch.hpp>

#include "config/flag_status.hpp"
#include "config/parser.hpp"
#include "config_test_support.hpp"

using namespace mactor::config;
using namespace mactor::config::testing;

namespace {

validated run(const std::vector<std::string>& extra) {
  auto flags = base_flags();
  flags.insert(flags.end(), extra.begin(), extra.end());
  return validate_flags(flags, 1);
}

std::string errors_of(const validated& v) {
  std::string all;
  for (const auto& e : v.report.errors) all += e + "\n";
  return all;
}

}  // namespace

TEST_CASE("the precision-aware optimizer (--use-precision-aware-optimizer) needs the distributed optimizer and Adam") {
  auto alone = run({"--use-precision-aware-optimizer"});
  INFO(errors_of(alone));
  CHECK(alone.has_error("--use-precision-aware-optimizer is only supported with the distributed optimizer; "
                        "add --use-distributed-optimizer"));
  auto sgd = run({"--use-precision-aware-optimizer", "--use-distributed-optimizer", "--optimizer", "sgd"});
  CHECK(sgd.has_error("only supported with --optimizer adam (got sgd)"));
  auto good = run({"--use-precision-aware-optimizer", "--use-distributed-optimizer", "--exp-avg-dtype", "bf16",
                   "--exp-avg-sq-dtype", "fp8", "--main-grads-dtype", "bf16"});
  INFO(errors_of(good));
  CHECK(good.report.ok());
  CHECK(good.args.experimental.exp_avg_dtype == "bfloat16");  // rule 29's torch dtypes
  CHECK(good.args.experimental.exp_avg_sq_dtype == "uint8");
}

TEST_CASE("each optimizer dtype flag other than fp32 needs --use-precision-aware-optimizer") {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--main-grads-dtype", "bf16"}, {"--main-params-dtype", "fp16"}, {"--exp-avg-dtype", "fp8"},
           {"--exp-avg-sq-dtype", "fp16"}}) {
    auto v = run({flag, value});
    INFO(flag << ": " << errors_of(v));
    CHECK(v.has_error(flag + " " + value + " can only be fp32 without the precision-aware optimizer; add "
                      "--use-precision-aware-optimizer"));
    CHECK(run({flag, "fp32"}).report.ok());
  }
}

TEST_CASE("rule 33: under --bf16 the gradients accumulate and reduce in fp32 unless bf16 is asked for") {
  CHECK(run({"--bf16"}).args.mixed_precision.accumulate_allreduce_grads_in_fp32);
  CHECK_FALSE(run({"--bf16", "--grad-reduce-in-bf16"}).args.mixed_precision.accumulate_allreduce_grads_in_fp32);
  // --grad-reduce-in-bf16 wins over an explicit --accumulate-allreduce-grads-in-fp32.
  CHECK_FALSE(run({"--bf16", "--grad-reduce-in-bf16", "--accumulate-allreduce-grads-in-fp32"})
                  .args.mixed_precision.accumulate_allreduce_grads_in_fp32);
  const auto bf16_grads = run({"--bf16", "--use-precision-aware-optimizer", "--use-distributed-optimizer",
                               "--main-grads-dtype", "bf16"});
  REQUIRE(bf16_grads.report.ok());
  CHECK_FALSE(bf16_grads.args.mixed_precision.accumulate_allreduce_grads_in_fp32);
  CHECK_FALSE(run({}).args.mixed_precision.accumulate_allreduce_grads_in_fp32);  // fp32: no such buffer
  auto both = run({"--bf16", "--accumulate-allreduce-grads-in-fp32", "--use-precision-aware-optimizer",
                   "--use-distributed-optimizer", "--main-grads-dtype", "bf16"});
  CHECK(both.has_error("--accumulate-allreduce-grads-in-fp32 requires --main-grads-dtype fp32 (got bf16)"));
}

TEST_CASE("the precision flags are implemented, --main-params-dtype fp16 included") {
  const std::vector<std::string> words{"--use-precision-aware-optimizer", "--exp-avg-dtype", "fp8", "--exp-avg-sq-dtype",
                                       "bf16", "--main-grads-dtype", "bf16", "--grad-reduce-in-bf16"};
  CHECK(check_support(parse_command_line(words, "pretrain_gpt").args).errors.empty());
  const std::vector<std::string> fp16_main{"--use-precision-aware-optimizer", "--main-params-dtype", "fp16"};
  CHECK(check_support(parse_command_line(fp16_main, "pretrain_gpt").args).errors.empty());
}

TEST_CASE("the CPU-offloaded optimizer (--optimizer-cpu-offload) follows Megatron's two asserts, its placement flags accepted") {
  auto alone = run({"--optimizer-cpu-offload"});
  CHECK(alone.has_error("--optimizer-cpu-offload requires --use-precision-aware-optimizer"));
  const std::vector<std::string> offload = {"--optimizer-cpu-offload", "--use-precision-aware-optimizer",
                                            "--use-distributed-optimizer", "--fp8-format", "e4m3", "--fp8-param-gather"};
  auto tensorwise = offload;
  tensorwise.insert(tensorwise.end(), {"--fp8-recipe", "tensorwise"});
  CHECK(run(tensorwise).has_error("the optimizer cpu offload must be used in conjunction with `--fp8-recipe delayed`"));
  auto good = run(offload);
  INFO(errors_of(good));
  CHECK(good.report.ok());
  const std::string table = flag_status_table();
  CHECK(table.find("--optimizer-cpu-offload\ttraining\timplemented\t") != std::string::npos);
  for (const char* flag : {"--optimizer-offload-fraction", "--use-torch-optimizer-for-cpu-offload",
                           "--overlap-cpu-optimizer-d2h-h2d", "--disable-tp-comm-overlap-ag", "--train-sync-interval",
                           "--no-align-grad-reduce", "--no-align-param-gather", "--use-ring-exchange-p2p",
                           "--pipeline-model-parallel-comm-backend", "--keep-fp8-transpose-cache",
                           "--no-scatter-gather-tensors-in-pipeline"}) {
    INFO(flag);
    CHECK(table.find(std::string(flag) + "\t") != std::string::npos);
    const bool accepted = table.find(std::string(flag) + "\ttraining\taccepted without effect\t") != std::string::npos ||
                          table.find(std::string(flag) + "\tdistributed\taccepted without effect\t") != std::string::npos;
    CHECK(accepted);
  }
}
