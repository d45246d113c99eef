// The stage layout: sizes from the config message, positions from the process groups, and a
// clear error when a rank's process groups were built from other flags than rank 0's.
#include "training/stage_layout.hpp"

#include <catch2/catch.hpp>

#include "config/resolve.hpp"

using namespace mactor;

namespace {

config::megatron_args args_with(std::vector<std::string> extra, int world) {
  std::vector<std::string> flags{"--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
                                 "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
                                 "--global-batch-size", "16", "--train-iters", "1", "--lr", "1e-3", "--mock-data",
                                 "--tokenizer-type", "NullTokenizer", "--vocab-size", "4096"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  auto r = config::resolve(flags, "pretrain_gpt", {0, world});
  INFO(r.err);
  REQUIRE_FALSE(r.exit_status.has_value());
  return r.args;
}

}  // namespace

TEST_CASE("each local chunk of a pipeline rank holds its virtual stage's layers, the ends where they belong") {
  config::pipeline_split_settings s;
  s.num_layers = 8, s.pipeline_size = 2, s.virtual_size = 2;
  const auto layouts = training::chunk_layouts(config::split_pipeline_layers(s), 1);
  REQUIRE(layouts.size() == 2);
  CHECK(layouts[0].layer_begin == 2);
  CHECK(layouts[0].layer_end == 4);
  CHECK_FALSE(layouts[0].pre_process);
  CHECK(layouts[1].layer_begin == 6);
  CHECK(layouts[1].post_process);
  // An uneven last stage, read from the flags the config message carries.
  const auto uneven = args_with({"--pipeline-model-parallel-size", "2", "--decoder-last-pipeline-num-layers", "2"}, 2);
  const auto last = training::chunk_layouts(config::split_pipeline_layers(config::pipeline_split_settings::of(uneven)), 1);
  REQUIRE(last.size() == 1);
  CHECK(last[0].layer_begin == 6);
  CHECK(last[0].layer_end == 8);
}

TEST_CASE("a stage's layout comes from the config message and must agree with its process groups") {
  const auto one = args_with({}, 1);
  comm::launch_env env;
  training::parallel_context ctx(one, env);
  const auto l = training::stage_layout_of(one, ctx);
  CHECK(l.pipeline_size == 1);
  CHECK(l.virtual_size == 1);
  CHECK(l.micro_batch_size == 2);
  CHECK(l.data_parallel_size == 1);
  // Rank 0 was started with --pipeline-model-parallel-size 2 on 2 ranks; this process was not.
  const auto other = args_with({"--pipeline-model-parallel-size", "2"}, 2);
  CHECK_THROWS_AS(training::stage_layout_of(other, ctx), training::layout_mismatch);
  CHECK_THROWS_WITH(training::stage_layout_of(other, ctx),
                    Catch::Contains("--pipeline-model-parallel-size is 2 in rank 0's flags but 1 in this rank's "
                                    "process groups") &&
                        Catch::Contains("give every rank the same flags"));
}
