// JSON round trips and Megatron's arguments block.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "config/config_json.hpp"
#include "config/flag_table.hpp"
#include "config_test_support.hpp"
#include "random_config.hpp"

using namespace mactor::config;
using namespace mactor::config::testing;


TEST_CASE("randomized configs survive a JSON round trip unchanged") {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 20; ++round) {
    const megatron_args a = random_config(rng, round);
    const auto text = to_json(a);
    const auto back = from_json(text);
    CHECK(to_json(back) == text);
    CHECK(same_config(a, back));
  }
}

TEST_CASE("the JSON is keyed by Megatron's dests and carries the derived values") {
  auto v = with_base({}, 4);
  REQUIRE(v.report.ok());
  const auto j = nlohmann::json::parse(to_json(v.args));
  CHECK(j.size() == 564 + 12 + 1);  // 565 flags share 564 dests, plus the derived values and mactor_pipeline_schedule
  CHECK(j["data_parallel_size"] == 4);
  CHECK(j["masked_softmax_fusion"] == true);
  CHECK(j["num_microbatches"] == 1);
  CHECK(j["encoder_num_layers"] == 4);
}

TEST_CASE("the arguments block is Megatron's: sorted, dotted to column 48, Python values") {
  auto v = with_base({"--data-cache-path", "/tmp/x"});
  const auto block = arguments_block(v.args);
  CHECK(block.rfind("------------------------ arguments ------------------------\n", 0) == 0);
  CHECK(block.find("  num_layers ...................................... 4\n") != std::string::npos);
  CHECK(block.find("  lr .............................................. 0.001\n") != std::string::npos);
  CHECK(block.find("  cp_comm_type .................................... ['p2p']\n") != std::string::npos);
  CHECK(block.find("  kv_channels ..................................... 16\n") != std::string::npos);
  CHECK(block.find("  decoder_num_layers .............................. None\n") != std::string::npos);
  CHECK(block.find("  norm_epsilon .................................... 1e-05\n") != std::string::npos);
  CHECK(block.find("batch_size ....") == block.find("global_batch_size ....") + 7);  // deleted by Megatron
  CHECK(block.find("accumulate_allreduce_grads_in_fp32") < block.find("adam_beta1"));
  const std::string last = "\n-------------------- end of arguments ---------------------\n";
  CHECK(block.compare(block.size() - last.size(), last.size(), last) == 0);
}
