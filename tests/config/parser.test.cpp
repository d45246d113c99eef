// The parser follows argparse: option matching, nargs, switches and the exact error texts.
#include <catch2/catch.hpp>

#include "config/parser.hpp"

using namespace mactor::config;

namespace {

parsed_command_line parse(std::vector<std::string> words) { return parse_command_line(words, "pretrain_gpt"); }

std::string error_of(std::vector<std::string> words) {
  try {
    parse(words);
  } catch (const usage_error& e) {
    std::string text = e.what();
    auto at = text.find("pretrain_gpt: error: ");
    REQUIRE(at != std::string::npos);
    REQUIRE(text.rfind("usage: pretrain_gpt", 0) == 0);
    return text.substr(at + 21, text.size() - at - 22);
  }
  FAIL("expected a usage error");
  return {};
}

}  // namespace

TEST_CASE("typed values land in the field named by the dest") {
  auto p = parse({"--num-layers", "12", "--lr", "3e-4", "--position-embedding-type", "rope", "--swiglu",
                  "--no-masked-softmax-fusion"});
  CHECK(p.args.network_size.num_layers == 12);
  CHECK(p.args.learning_rate.lr == 3e-4);
  CHECK(p.args.network_size.position_embedding_type == "rope");
  CHECK(p.args.network_size.swiglu);
  CHECK_FALSE(p.args.training.masked_softmax_fusion);
  CHECK(p.given == std::vector<std::string>{"num_layers", "lr", "position_embedding_type", "swiglu", "masked_softmax_fusion"});
}

TEST_CASE("unset flags keep Megatron's defaults") {
  auto p = parse({});
  CHECK_FALSE(p.args.network_size.num_layers.has_value());
  CHECK(p.args.network_size.make_vocab_size_divisible_by == 128);
  CHECK(p.args.learning_rate.lr_decay_style == "linear");
  CHECK(p.args.inference.inference_max_batch_size == 8);  // shared dest: the first registration's default
  CHECK(p.args.distributed.cp_comm_type == std::vector<std::string>{"p2p"});
}

TEST_CASE("unrecognized arguments are all listed, words after them included") {
  CHECK(error_of({"--foo", "--num-layers", "2", "--bar=1", "baz"}) == "unrecognized arguments: --foo --bar=1 baz");
}

TEST_CASE("abbreviations are refused as Megatron's parser sets allow_abbrev=False") {
  CHECK(error_of({"--num-lay", "2"}) == "unrecognized arguments: --num-lay 2");
}

TEST_CASE("bad values name the argument, the type and the text") {
  CHECK(error_of({"--num-layers", "x"}) == "argument --num-layers: invalid int value: 'x'");
  CHECK(error_of({"--lr", "fast"}) == "argument --lr: invalid float value: 'fast'");
  CHECK(error_of({"--window-size", "1,a"}) == "argument --window-size: invalid tuple_type value: '1,a'");
  CHECK(error_of({"--moe-layer-freq", "[1]*x"}) == "argument --moe-layer-freq: invalid moe_freq_type value: '[1]*x'");
}

TEST_CASE("an invalid choice lists the choices as Python prints them") {
  CHECK(error_of({"--normalization", "BatchNorm"}) ==
        "argument --normalization: invalid choice: 'BatchNorm' (choose from 'LayerNorm', 'RMSNorm')");
  CHECK(error_of({"--timing-log-level", "5"}) == "argument --timing-log-level: invalid choice: 5 (choose from 0, 1, 2)");
}

TEST_CASE("a missing value is reported for one and for one-or-more arguments") {
  CHECK(error_of({"--num-layers"}) == "argument --num-layers: expected one argument");
  CHECK(error_of({"--num-layers", "--swiglu"}) == "argument --num-layers: expected one argument");
  CHECK(error_of({"--data-path", "a", "--iterations-to-skip"}) == "argument --iterations-to-skip: expected at least one argument");
}

TEST_CASE("a switch given a value is refused") {
  CHECK(error_of({"--fp16=yes"}) == "argument --fp16: ignored explicit argument 'yes'");
}

TEST_CASE("negative numbers are values but exponent forms are not, as in argparse") {
  auto p = parse({"--lr", "-0.5", "--seed", "-3", "--min-lr", "-.25"});
  CHECK(p.args.learning_rate.lr == -0.5);
  CHECK(p.args.initialization.seed == -3);
  CHECK(p.args.learning_rate.min_lr == -0.25);
  CHECK(error_of({"--lr", "-1e-4"}) == "argument --lr: expected one argument");
}

TEST_CASE("nargs lists consume words up to the next option") {
  auto p = parse({"--data-path", "0.3", "a", "0.7", "b", "--split", "99,1,0", "--data-cache-path", "c"});
  CHECK(p.args.data.data_path == std::vector<std::string>{"0.3", "a", "0.7", "b"});
  CHECK(p.args.data.split == "99,1,0");
  auto empty = parse({"--data-path"});  // nargs='*' accepts nothing
  CHECK(empty.args.data.data_path == std::vector<std::string>{});
}

TEST_CASE("equals form, aliases and --x/--no-x pairs") {
  auto p = parse({"--num-layers=3", "--persistent-save-interval", "50", "--no-rl-partial-rollouts", "--langrl-external-server"});
  CHECK(p.args.network_size.num_layers == 3);
  CHECK(p.args.checkpointing.save_interval == 50);
  CHECK_FALSE(p.args.rl.rl_partial_rollouts);
  CHECK(p.args.rl.langrl_external_server);
}

TEST_CASE("repeated flags keep the last value") {
  auto p = parse({"--num-layers", "3", "--num-layers", "5"});
  CHECK(p.args.network_size.num_layers == 5);
}

TEST_CASE("type=bool follows Python: any non-empty text is True") {
  CHECK(parse({"--onnx-safe", "False"}).args.network_size.onnx_safe == true);
  CHECK(parse({"--onnx-safe", ""}).args.network_size.onnx_safe == false);
}

TEST_CASE("layer patterns accept an int or a list expression") {
  using list = std::vector<std::int64_t>;
  CHECK(std::get<list>(parse({"--moe-layer-freq", "([1]*3+[0]*1)*3"}).args.moe.moe_layer_freq) ==
        list{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0});
  CHECK(std::get<std::int64_t>(parse({"--moe-layer-freq", "4"}).args.moe.moe_layer_freq) == 4);
  CHECK(parse({"--window-size", "(128,0)"}).args.network_size.window_size == list{128, 0});
}

TEST_CASE("the two kitchen flags exclude each other") {
  CHECK(error_of({"--kitchen-config-file", "a", "--kitchen-recipe-number", "2"}) ==
        "argument --kitchen-recipe-number: not allowed with argument --kitchen-config-file");
}

TEST_CASE("after -- every word is unrecognized") {
  CHECK(error_of({"--", "--num-layers", "2"}) == "unrecognized arguments: -- --num-layers 2");
}

TEST_CASE("mactor's own flags are recognized") {
  auto p = parse({"--dump-config", "--flag-status", "-h"});
  CHECK(p.program.dump_config);
  CHECK(p.program.flag_status);
  CHECK(p.program.help);
}

TEST_CASE("help shows all 33 groups as sections in Megatron's order") {
  const auto text = help_text("pretrain_gpt");
  std::size_t at = 0;
  for (const char* section : {"network_size (_add_network_size_args):", "regularization (_add_regularization_args):",
                              "training (_add_training_args):", "kitchen_quantization (_add_kitchen_quantization_arguments):",
                              "sft (_add_sft_args):"}) {
    auto found = text.find(section, at);
    REQUIRE(found != std::string::npos);
    at = found;
  }
  CHECK(text.find("--num-layers NUM_LAYERS") != std::string::npos);
}
