// --ckpt-format torch and --auto-detect-ckpt-format: accepted, and the combinations mactor's torch
// format does not write (the distributed optimizer's distrib_optim.pt, expert parallelism) refused
// naming the flags and the alternative.
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

TEST_CASE("ckpt-format torch with the distributed optimizer or expert parallelism is refused") {
  const auto dist = with_base({"--ckpt-format", "torch", "--use-distributed-optimizer"});
  CHECK(dist.has_error("--ckpt-format torch with --use-distributed-optimizer is not implemented yet"));
  CHECK(dist.has_error("use --ckpt-format torch_dist"));
  CHECK(with_base({"--use-distributed-optimizer"}).report.ok());
  const auto ep = with_base({"--ckpt-format", "torch", "--num-experts", "2", "--moe-router-topk", "1",
                             "--expert-model-parallel-size", "2"}, 2);
  CHECK(ep.has_error("--ckpt-format torch with --expert-model-parallel-size > 1 is not implemented yet"));
}
