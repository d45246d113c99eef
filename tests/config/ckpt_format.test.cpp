// --ckpt-format torch and --auto-detect-ckpt-format: accepted (with the distributed optimizer
// too), and the combinations the torch format does not write (SGD's state in distrib_optim.pt,
// expert parallelism) refused naming the flags and the alternative.
#include <catch2/catch.hpp>

#include "config/flag_status.hpp"
#include "config/parser.hpp"
#include "config_test_support.hpp"

using namespace mactor::config;
using namespace mactor::config::testing;

TEST_CASE("ckpt-format torch and auto-detect-ckpt-format are implemented") {
  const std::vector<std::string> words{"--ckpt-format", "torch", "--auto-detect-ckpt-format"};
  CHECK(check_support(parse_command_line(words, "pretrain_gpt").args).errors.empty());
  CHECK(support_of("auto_detect_ckpt_format").status == support::implemented);
  const std::vector<std::string> zarr{"--ckpt-format", "zarr"};
  CHECK_FALSE(check_support(parse_command_line(zarr, "pretrain_gpt").args).errors.empty());
  CHECK(with_base({"--ckpt-format", "torch", "--auto-detect-ckpt-format"}).report.ok());
}

TEST_CASE("ckpt-format torch with the distributed optimizer and SGD, or expert parallelism, is refused") {
  auto support = [](std::vector<std::string> words) { return check_support(parse_command_line(words, "pretrain_gpt").args); };
  CHECK(support({"--ckpt-format", "torch", "--use-distributed-optimizer"}).errors.empty());
  const auto dist = support({"--ckpt-format", "torch", "--use-distributed-optimizer", "--optimizer", "sgd"});
  REQUIRE(dist.errors.size() == 1);
  CHECK(dist.errors[0].find("--ckpt-format torch with --use-distributed-optimizer saves Adam's state only") == 0);
  CHECK(dist.errors[0].find("use --ckpt-format torch_dist") != std::string::npos);
  CHECK(support({"--use-distributed-optimizer"}).errors.empty());
  CHECK(support({"--ckpt-format", "torch"}).errors.empty());
  const auto ep = support({"--ckpt-format", "torch", "--expert-model-parallel-size", "2"});
  // (expert parallelism itself is not built yet either: that is a second error today)
  bool named = false;
  for (const auto& e : ep.errors)
    named = named || e.find("--ckpt-format torch with --expert-model-parallel-size > 1 is recognized but not implemented") == 0;
  CHECK(named);
  // Megatron's own validation accepts the combination: the refusal is mactor's.
  CHECK(with_base({"--ckpt-format", "torch", "--use-distributed-optimizer"}).report.ok());
}

TEST_CASE("ckpt-format fsdp_dtensor with Megatron FSDP's strategies is implemented and FSDP's unbuilt combinations are refused") {
  auto support = [](std::vector<std::string> words) { return check_support(parse_command_line(words, "pretrain_gpt").args); };
  for (const char* strategy : {"no_shard", "optim", "optim_grads", "optim_grads_params"})
    CHECK(support({"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--data-parallel-sharding-strategy", strategy,
                   "--fsdp-double-buffer", "--no-strict-fsdp-dtensor-load"})
              .errors.empty());
  CHECK(support({"--use-torch-fsdp2", "--torch-fsdp2-no-reshard-after-forward"}).errors.empty());
  // Overlap is timing only under FSDP (each backward's reduce-scatter runs in line).
  CHECK(support({"--use-torch-fsdp2", "--overlap-grad-reduce", "--overlap-param-gather"}).errors.empty());
  // Megatron FSDP and torch FSDP2 never read --check-for-large-grads.
  CHECK(support({"--use-torch-fsdp2", "--check-for-large-grads"}).errors.empty());
  const auto partial = support({"--use-torch-fsdp2", "--num-distributed-optimizer-instances", "2"});
  REQUIRE(partial.errors.size() == 1);
  CHECK(partial.errors[0].find("--use-torch-fsdp2 with --num-distributed-optimizer-instances > 1 is recognized but not "
                               "implemented") == 0);
  CHECK(with_base({"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--data-parallel-sharding-strategy",
                   "optim_grads_params"}).report.ok());
  // Megatron FSDP's hybrid sharding is built.
  for (const char* strategy : {"optim_grads", "optim_grads_params"})
    CHECK(support({"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--data-parallel-sharding-strategy", strategy,
                   "--num-distributed-optimizer-instances", "2"})
              .errors.empty());
}
