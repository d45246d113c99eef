// Where a load takes its parameters from: --load-main-params-from-ckpt (a 16-bit model's fp32 main
// parameters from the checkpoint, or rebuilt from its 16-bit weights without the flag, as Megatron's
// reload_model_params) and --pretrained-checkpoint (Megatron's finetuning fallback when --load
// holds no checkpoint) and --no-initialization (the weights left for the checkpoint to fill).
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <unistd.h>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "tensor/half_float.hpp"
#include "tests/training/launch_support.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

const std::string model =
    "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
    "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 1e-2 --bf16 "
    "--tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-iters 0 --seed 7 --train-iters 2";

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/checkpoint_sources" / (name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  return dir;
}

run_result pretrain(const std::string& flags) {
  auto r = run_shell(bin_dir() + "/pretrain_gpt " + model + " " + flags);
  INFO(flags << "\n" << r.out << r.err);
  REQUIRE(r.status == 0);
  return r;
}

bool bf16_exact(float v) { return mactor::tensor::to_float(mactor::tensor::to_bfloat16(v)) == v; }

// Every parameter (not optimizer state) of the checkpoint at iteration 2, by name.
std::map<std::string, std::vector<float>> parameters(const fs::path& dir) {
  mactor::checkpoint::checkpoint_reader r(dir.string(), 2);
  std::map<std::string, std::vector<float>> out;
  for (const auto& name : r.names())
    if (name.rfind("optimizer.", 0) != 0) out[name] = r.read_whole(name);
  return out;
}

}  // namespace

TEST_CASE("without the optimizer state a bf16 model's main parameters are its bf16 weights unless --load-main-params-from-ckpt") {
  const auto trained = scratch("trained");
  pretrain("--save " + trained.string() + " --save-interval 2");
  const auto saved = parameters(trained);
  std::size_t not_bf16 = 0;
  for (const auto& [name, v] : saved)
    for (float x : v) not_bf16 += !bf16_exact(x);
  REQUIRE(not_bf16 > 0);  // fp32 main parameters: the two ways differ

  // Loaded at iteration 2 with nothing left to train, and saved again.
  const auto rebuilt = scratch("rebuilt"), kept = scratch("kept");
  pretrain("--load " + trained.string() + " --no-load-optim --save " + rebuilt.string() + " --save-interval 100");
  pretrain("--load " + trained.string() + " --no-load-optim --load-main-params-from-ckpt --save " + kept.string() +
           " --save-interval 100");
  const auto from_weights = parameters(rebuilt), from_checkpoint = parameters(kept);
  REQUIRE(from_weights.size() == saved.size());
  for (const auto& [name, v] : saved) {
    INFO(name);
    const auto& w = from_weights.at(name);
    const auto& c = from_checkpoint.at(name);
    REQUIRE(w.size() == v.size());
    CHECK(std::memcmp(c.data(), v.data(), v.size() * sizeof(float)) == 0);  // the checkpoint's fp32 values
    bool rounded = true;
    for (std::size_t i = 0; i < v.size(); ++i) rounded &= w[i] == mactor::tensor::to_float(mactor::tensor::to_bfloat16(v[i]));
    CHECK(rounded);  // the bf16 weights, widened
  }
}

TEST_CASE("a --pretrained-checkpoint loads as --finetune when --load holds no checkpoint, and neither holding one is an error") {
  const auto trained = scratch("pretrained");
  pretrain("--save " + trained.string() + " --save-interval 2");
  const auto empty = scratch("empty");
  fs::create_directories(empty);
  const auto fallback = pretrain("--load " + empty.string() + " --pretrained-checkpoint " + trained.string());
  CHECK_THAT(fallback.out, Catch::Contains("Checkpoint file not found in load directory " + empty.string() +
                                           " attempting to finetune with checkpoint in " + trained.string()));
  const auto finetune = pretrain("--load " + trained.string() + " --finetune");
  const auto a = parse_losses(fallback.out).train, b = parse_losses(finetune.out).train;
  REQUIRE(a.size() == 2);  // finetuning starts at iteration 1
  CHECK(a == b);

  const auto r = run_shell(bin_dir() + "/pretrain_gpt " + model + " --load " + empty.string() + " --pretrained-checkpoint " +
                           empty.string());
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("No checkpoint found in load directory or pretrained directory"));
}

TEST_CASE("a run with --no-initialization resumes as an initialized run does, and without a checkpoint to fill the weights it is an error") {
  const auto cut = scratch("no_init_cut");
  pretrain("--save " + cut.string() + " --save-interval 1 --exit-interval 1");
  const auto full = iteration_lines(pretrain("").out);
  const auto resumed = iteration_lines(pretrain("--load " + cut.string() + " --no-initialization").out);
  REQUIRE(full.size() == 2);
  REQUIRE(resumed.size() == 1);
  CHECK(resumed.at(2) == full.at(2));  // every logged number: loss, norms, learning rate

  const auto without_load = run_shell(bin_dir() + "/pretrain_gpt " + model + " --no-initialization");
  CHECK(without_load.status == 2);
  CHECK_THAT(without_load.err, Catch::Contains("--no-initialization leaves the weights uninitialized") &&
                                   Catch::Contains("give --load"));
  const auto empty = scratch("no_init_empty");
  fs::create_directories(empty);
  const auto nothing = run_shell(bin_dir() + "/pretrain_gpt " + model + " --no-initialization --load " + empty.string());
  CHECK(nothing.status == 2);
  CHECK_THAT(nothing.err, Catch::Contains(empty.string() + " holds no checkpoint") &&
                              Catch::Contains("drop --no-initialization"));
}

TEST_CASE("a given --padded-vocab-size is the model's vocabulary, not padded further") {
  const auto dir = scratch("padded");
  pretrain("--padded-vocab-size 4100 --save " + dir.string() + " --save-interval 2");
  mactor::checkpoint::checkpoint_reader r(dir.string(), 2);
  CHECK(r.global_shape("embedding.word_embeddings.weight") == std::vector<std::int64_t>{4100, 32});  // not padded to 4224
  const auto padded = scratch("padded_default");
  pretrain("--save " + padded.string() + " --save-interval 2");
  mactor::checkpoint::checkpoint_reader d(padded.string(), 2);
  CHECK(d.global_shape("embedding.word_embeddings.weight") == std::vector<std::int64_t>{4096, 32});  // 4095 + EOD, a multiple of 128
}

TEST_CASE("ckpt-convert-format saves the loaded checkpoint in the other format and exits and a run resumed from it logs the same losses") {
  const auto dir = scratch("convert");
  const std::string original = (dir / "original").string(), converted = (dir / "converted").string();
  pretrain("--save " + original + " --save-interval 2");
  for (const std::string& to : {"torch", "torch_dist"}) {
    const std::string from = to == "torch" ? "torch_dist" : "torch";
    const std::string source = to == "torch" ? original : converted + "/torch";
    const auto r = pretrain("--load " + source + " --ckpt-format " + from + " --ckpt-convert-format " + to +
                            " --ckpt-convert-save " + converted);
    INFO(r.out);
    CHECK(r.out.find("> converted checkpoint: " + from + " -> " + to + ".") != std::string::npos);
    CHECK(r.out.find("\ntraining ...\n") == std::string::npos);
    CHECK_FALSE(std::regex_search(r.out, std::regex(R"(\] iteration +\d+/)")));
    CHECK(mactor::checkpoint::read_tracker(converted + "/" + to) == 2);
  }
  // torch_dist -> torch -> torch_dist: resuming from each copy logs what resuming the original logs.
  const auto losses = [&](const std::string& load, const std::string& format) {
    return logged_values(pretrain("--load " + load + " --ckpt-format " + format + " --train-iters 4 --override-opt-param-scheduler").out, "lm loss");
  };
  const auto want = losses(original, "torch_dist");
  REQUIRE(want.size() == 2);
  CHECK(losses(converted + "/torch", "torch") == want);
  CHECK(losses(converted + "/torch_dist", "torch_dist") == want);
  // Megatron's preconditions: a target directory and a checkpoint to convert.
  const auto no_save = run_shell(bin_dir() + "/pretrain_gpt " + model + " --load " + original + " --ckpt-convert-format torch");
  CHECK(no_save.status == 2);
  CHECK(no_save.err.find("--ckpt-convert-save") != std::string::npos);
  const auto zarr = run_shell(bin_dir() + "/pretrain_gpt " + model + " --load " + original +
                              " --ckpt-convert-format zarr --ckpt-convert-save " + converted);
  CHECK(zarr.status == 2);
  CHECK(zarr.err.find("zarr") != std::string::npos);
  fs::remove_all(dir);
}
