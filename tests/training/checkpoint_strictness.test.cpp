// --dist-ckpt-strictness on load (and --save-retain-interval on save): a tied model's checkpoint lacks output_layer.weight, which an
// untied model asks for ("unexpected" in dist_checkpointing's terms); an untied model's checkpoint
// holds output_layer.weight, which a tied model never asks for ("missing"). Each mode either
// refuses the checkpoint naming the key (exit 2), or warns and trains on, or says nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

std::string flags() {
  return " --mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 "
         "--tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-iters 0 --seed 3";
}

// A 2-iteration checkpoint, tied or untied, saved by a PP2 job.
fs::path saved(bool untied) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/checkpoints" /
                       ((untied ? "strict_untied_" : "strict_tied_") + std::to_string(getpid()));
  if (fs::exists(dir / "latest_checkpointed_iteration.txt")) return dir;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  const auto r = run_shell(mactor_bin() + " -np 2 --oversubscribe " + bin_dir() + "/pretrain_gpt" + flags() +
                           " --pipeline-model-parallel-size 2 --train-iters 2 --save " + dir.string() +
                           " --save-interval 2" + (untied ? " --untie-embeddings-and-output-weights" : ""));
  INFO(r.err);
  REQUIRE(r.status == 0);
  return dir;
}

// Loads `from` into a 1-process model (untied or not) for 2 more iterations under `mode`.
run_result load(const fs::path& from, bool untied, const std::string& mode) {
  return run_shell(bin_dir() + "/pretrain_gpt" + flags() + " --train-iters 4 --override-opt-param-scheduler --load " + from.string() +
                   (untied ? " --untie-embeddings-and-output-weights" : "") +
                   (mode.empty() ? "" : " --dist-ckpt-strictness " + mode));
}

}  // namespace

TEST_CASE("load strictness (--dist-ckpt-strictness): a tensor the checkpoint lacks fails the load, or is named and kept initialized") {
  const auto tied = saved(false);
  for (const std::string mode : {"", "assume_ok_unexpected", "raise_unexpected", "raise_all"}) {
    INFO("mode " << mode);
    const auto r = load(tied, true, mode);
    CHECK(r.status == 2);
    CHECK(r.err.find("output_layer.weight") != std::string::npos);
  }
  for (const std::string mode : {"log_unexpected", "log_all", "return_unexpected", "return_all"}) {
    INFO("mode " << mode);
    const auto r = load(tied, true, mode);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.err.find("WARNING") != std::string::npos);
    CHECK(r.err.find("lacks 1 tensor(s) this model has: output_layer.weight") != std::string::npos);
    CHECK(r.out.find("iteration        4/       4") != std::string::npos);
  }
  const auto quiet = load(tied, true, "ignore_all");
  CHECK(quiet.status == 0);
  CHECK(quiet.err.find("output_layer.weight") == std::string::npos);
}

TEST_CASE("load strictness (--dist-ckpt-strictness): a checkpoint tensor no rank uses is named by the *_all modes only") {
  const auto untied = saved(true);
  for (const std::string mode : {"", "assume_ok_unexpected", "log_unexpected", "raise_unexpected", "ignore_all"}) {
    INFO("mode " << mode);
    const auto r = load(untied, false, mode);
    CHECK(r.status == 0);
    CHECK(r.err.find("output_layer.weight") == std::string::npos);
  }
  const auto logged = load(untied, false, "log_all");
  INFO(logged.err);
  CHECK(logged.status == 0);
  CHECK(logged.err.find("holds 1 model tensor(s) no rank uses: output_layer.weight") != std::string::npos);
  const auto raised = load(untied, false, "raise_all");
  CHECK(raised.status == 2);
  CHECK(raised.err.find("output_layer.weight") != std::string::npos);
  CHECK(raised.err.find("raise_all") != std::string::npos);
}

TEST_CASE("save retention (--save-retain-interval) keeps the multiples of the interval and the newest checkpoint, deleting the rest once tracked") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/checkpoints" / ("retain_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const auto r = run_shell(mactor_bin() + " -np 2 --oversubscribe " + bin_dir() + "/pretrain_gpt" + flags() +
                           " --pipeline-model-parallel-size 2 --train-iters 10 --save " + dir.string() +
                           " --save-interval 2 --save-retain-interval 4");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) kept.push_back(e.path().filename().string());
  std::sort(kept.begin(), kept.end());
  // 2 and 6 went once 4 and 8 were tracked; 10, the newest, stays (Megatron deletes only the
  // previously tracked checkpoint).
  CHECK(kept == std::vector<std::string>{"iter_0000004", "iter_0000008", "iter_0000010"});
  CHECK(r.out.find("successfully deleted checkpoint from iteration       2 at " + dir.string()) != std::string::npos);
  CHECK(r.out.find("successfully deleted checkpoint from iteration       6 at " + dir.string()) != std::string::npos);
  CHECK(r.out.find("successfully deleted checkpoint from iteration       8") == std::string::npos);
}
