// --use-checkpoint-args: Megatron's load_args_from_checkpoint over saved arguments.
#include "config/checkpoint_args.hpp"

#include <catch2/catch.hpp>

#include "config/config_json.hpp"
#include "config/parser.hpp"
#include "config/resolve.hpp"

using namespace mactor;

namespace {

config::megatron_args parsed(std::vector<std::string> flags) {
  return config::parse_command_line(flags, "pretrain_gpt").args;
}

}  // namespace

TEST_CASE("the checkpoint's forced arguments replace the command line's, the others only fill what it left unset") {
  auto saved = parsed({"--num-layers", "24", "--hidden-size", "1024", "--swiglu", "--normalization", "RMSNorm",
                       "--tensor-model-parallel-size", "2", "--tokenizer-model", "/ckpt/tok.model"});
  const std::string json = config::to_json(saved);
  SECTION("model arguments") {
    auto args = parsed({"--num-layers", "12", "--use-checkpoint-args", "--load", "/ckpt"});
    const auto lines = config::apply_checkpoint_args(args, json);
    CHECK(*args.network_size.num_layers == 12);        // not forced: the command line's stays
    CHECK(*args.network_size.hidden_size == 1024);     // not given: the checkpoint's
    CHECK(args.network_size.swiglu);                   // forced
    CHECK(args.network_size.normalization == "RMSNorm");
    CHECK(args.distributed.tensor_model_parallel_size == 1);  // parallel sizes need the mp flag
    CHECK(*args.tokenizer.tokenizer_model == "/ckpt/tok.model");
    CHECK(std::find(lines.begin(), lines.end(), "Setting hidden_size to 1024 from checkpoint") != lines.end());
    CHECK(std::find(lines.begin(), lines.end(), "Setting swiglu to True from checkpoint") != lines.end());
    CHECK(std::find(lines.begin(), lines.end(), "Setting num_layers to 24 from checkpoint") == lines.end());
  }
  SECTION("parallel sizes and the tokenizer model follow their flags") {
    auto args = parsed({"--use-checkpoint-args", "--use-mp-args-from-checkpoint-args", "--no-use-tokenizer-model-from-checkpoint-args",
                        "--tokenizer-model", "/mine.model", "--load", "/ckpt"});
    config::apply_checkpoint_args(args, json);
    CHECK(args.distributed.tensor_model_parallel_size == 2);
    CHECK(*args.tokenizer.tokenizer_model == "/mine.model");
  }
  SECTION("bad saved arguments are an error") {
    auto args = parsed({"--use-checkpoint-args", "--load", "/ckpt"});
    CHECK_THROWS_WITH(config::apply_checkpoint_args(args, "[1, 2]"), Catch::Contains("not a JSON object"));
  }
}

TEST_CASE("resolve takes the arguments before validating them, and needs --load for them") {
  const std::vector<std::string> base = {"--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
                                         "--max-position-embeddings", "32", "--micro-batch-size", "1", "--train-iters", "1",
                                         "--lr", "1e-3", "--mock-data", "--use-checkpoint-args"};
  auto saved = parsed({"--num-layers", "6"});
  const std::string json = config::to_json(saved);
  auto with_load = base;
  with_load.insert(with_load.end(), {"--load", "/ckpt"});
  std::string asked;
  const auto r = config::resolve(with_load, "pretrain_gpt", {0, 1}, config::every_flag, [&](const std::string& dir) {
    asked = dir;
    return std::optional<std::string>(json);
  });
  INFO(r.err);
  REQUIRE_FALSE(r.exit_status.has_value());  // --num-layers, required, came from the checkpoint
  CHECK(asked == "/ckpt");
  CHECK(*r.args.network_size.num_layers == 6);
  CHECK_THAT(r.err, Catch::Contains("Setting num_layers to 6 from checkpoint"));
  const auto none = config::resolve(with_load, "pretrain_gpt", {0, 1}, config::every_flag,
                                    [](const std::string&) { return std::optional<std::string>(); });
  CHECK(none.exit_status == 2);  // no checkpoint: --num-layers is missing
  CHECK_THAT(none.err, Catch::Contains("Checkpoint not found to provide arguments, using provided arguments."));
  const auto no_load = config::resolve(base, "pretrain_gpt", {0, 1});
  CHECK(no_load.exit_status == 2);
  CHECK_THAT(no_load.err, Catch::Contains("--use-checkpoint-args needs --load"));
}
