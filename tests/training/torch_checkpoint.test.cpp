// --ckpt-format torch (Megatron's per-rank model_optim_rng.pt files) and --auto-detect-ckpt-format,
// launched with `mactor`. PyPI torch is the reference (torch_checkpoint_reference.py): it reads
// mactor's files and checks them against the torch_dist checkpoint of the same training, and it
// writes a checkpoint in Megatron's layout that mactor loads and trains from.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <regex>
#include <unistd.h>

#include "checkpoint/layout.hpp"
#include "tests/training/launch_support.hpp"

namespace fs = std::filesystem;
using namespace mactor::test;

namespace {

// 4 layers, dropout on, an LR schedule over 6 iterations (as checkpoint_resume.test.cpp).
std::string model_flags() {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr-decay-iters 6 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0.1 "
         "--attention-dropout 0.1 --log-interval 1 --eval-interval 2 --eval-iters 1 --seed 11";
}

fs::path scratch(const std::string& name) { return scratch_dir("torch_checkpoints", name); }

std::string python() {
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "/usr/bin/python3";
}

void reference(const std::string& arguments) {
  const std::string command = python() + " " + MACTOR_SOURCE_DIR + "/tests/training/torch_checkpoint_reference.py " + arguments;
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);
}

// Saved at 3 and resumed, the run equals the uninterrupted one: log lines and every tensor.
void check_exact_resume(int ranks, const std::string& flags, const std::string& name) {
  const auto full_dir = scratch(name + "_full"), cut_dir = scratch(name + "_cut");
  const auto full = launch(ranks, flags + " --save " + full_dir.string() + " --save-interval 6");
  const auto first = launch(ranks, flags + " --save " + cut_dir.string() + " --save-interval 6 --exit-interval 3");
  CHECK(first.out.find("saving checkpoint at iteration       3 to " + cut_dir.string() + " in torch format") != std::string::npos);
  REQUIRE(mactor::checkpoint::read_tracker(cut_dir.string()) == 3);
  CHECK_FALSE(fs::exists(cut_dir / "iter_0000003/metadata.json"));
  const auto resumed = launch(ranks, flags + " --load " + cut_dir.string() + " --save " + cut_dir.string() + " --save-interval 6");
  const auto want = iteration_lines(full.out), got = iteration_lines(resumed.out);
  REQUIRE(want.size() == 6);
  REQUIRE(got.size() == 3);
  REQUIRE(got.begin()->first == 4);
  for (const auto& [iteration, fields] : got) {
    INFO("iteration " << iteration);
    CHECK(fields == want.at(iteration));  // loss, learning rate, grad norm: the same digits
  }
  reference("same " + full_dir.string() + " " + cut_dir.string() + " 6");
}

}  // namespace

TEST_CASE("torch-format checkpoints: TP2 x PP2 with virtual stages resumes exactly and matches torch_dist") {
  const std::string flags = model_flags() + " --ckpt-format torch --tensor-model-parallel-size 2 "
                            "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 --swiglu";
  SECTION("saved at iteration 3 and resumed, it equals the uninterrupted run bitwise") { check_exact_resume(4, flags, "tp2pp2"); }
  SECTION("torch.load reads every rank's file; each tensor is that rank's slice of the torch_dist run's") {
    const auto torch_dir = scratch("tp2pp2_torch"), dist_dir = scratch("tp2pp2_dist");
    const std::string three = " --save-interval 3 --exit-interval 3";
    launch(4, flags + " --save " + torch_dir.string() + three);
    std::string dist_flags = flags;
    dist_flags.replace(dist_flags.find("--ckpt-format torch"), 19, "--ckpt-format torch_dist");
    launch(4, dist_flags + " --save " + dist_dir.string() + three);
    CHECK(fs::exists(torch_dir / "iter_0000003/mp_rank_01_001/model_optim_rng.pt"));
    reference("compare " + torch_dir.string() + " 3 " + dist_dir.string() + " 3");
  }
  SECTION("another layout is refused naming both") {
    const auto dir = scratch("tp2pp2_layout");
    launch(4, flags + " --save " + dir.string() + " --save-interval 3 --exit-interval 3");
    const auto r = launch(1, model_flags() + " --ckpt-format torch --swiglu --load " + dir.string(), 2);
    CHECK(r.err.find("mp_rank_00_000") != std::string::npos);
    CHECK(r.err.find("--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1") != std::string::npos);
  }
  SECTION("a model with fewer layers is refused naming a tensor it does not have") {
    const std::string tp2 = model_flags() + " --ckpt-format torch --tensor-model-parallel-size 2";
    const auto dir = scratch("tp2_layers");
    launch(2, tp2 + " --save " + dir.string() + " --save-interval 2 --exit-interval 2");
    std::string two = tp2;
    two.replace(two.find("--num-layers 4"), 14, "--num-layers 2");
    const auto r = launch(2, two + " --load " + dir.string(), 2);
    CHECK(r.err.find("decoder.layers.2.") != std::string::npos);
    CHECK(r.err.find("which this model does not have") != std::string::npos);
  }
}

TEST_CASE("torch-format checkpoints: a bf16 run saves bf16 weights with fp32 main parameters and resumes exactly") {
  const std::string flags = model_flags() + " --ckpt-format torch --bf16 --tensor-model-parallel-size 2";
  check_exact_resume(2, flags, "bf16");
  const auto torch_dir = scratch("bf16_torch"), dist_dir = scratch("bf16_dist");
  launch(2, flags + " --save " + torch_dir.string() + " --save-interval 3 --exit-interval 3");
  std::string dist_flags = flags;
  dist_flags.replace(dist_flags.find("--ckpt-format torch"), 19, "--ckpt-format torch_dist");
  launch(2, dist_flags + " --save " + dist_dir.string() + " --save-interval 3 --exit-interval 3");
  reference("compare " + torch_dir.string() + " 3 " + dist_dir.string() + " 3");
}

TEST_CASE("auto-detected checkpoint formats: either format loads and a checkpoint torch.save wrote in Megatron layout trains") {
  const std::string tp2 = model_flags() + " --tensor-model-parallel-size 2";
  const auto template_dir = scratch("template"), megatron_dir = scratch("megatron"), out_dir = scratch("from_megatron");
  launch(2, tp2 + " --ckpt-format torch --save " + template_dir.string() + " --save-interval 2 --exit-interval 2");
  reference("megatron " + template_dir.string() + " " + megatron_dir.string() + " 5 1234");
  SECTION("--finetune from it with the learning rate at zero: the saved weights are torch's") {
    const auto r = launch(2, tp2 + " --auto-detect-ckpt-format --load " + megatron_dir.string() + " --finetune --lr 0 "
                                 "--min-lr 0 --save " + out_dir.string() + " --save-interval 1 --exit-interval 1");
    const auto lines = iteration_lines(r.out);
    REQUIRE(lines.size() == 1);
    reference("compare " + megatron_dir.string() + " 5 " + out_dir.string() + " 1 --model-only");
  }
  SECTION("--use-checkpoint-args takes the arguments from mp_rank_00's args") {
    const auto r = launch(2, tp2 + " --use-checkpoint-args --load " + megatron_dir.string() + " --no-load-optim --exit-interval 6");
    CHECK(r.err.find("Checkpoint not found to provide arguments") == std::string::npos);
    CHECK(iteration_lines(r.out).begin()->first == 6);
  }
  SECTION("its optimizer state, numbered without param_names as Megatron's, is refused rather than guessed") {
    const auto r = launch(2, tp2 + " --load " + megatron_dir.string() + " --exit-interval 6", 2);
    CHECK(r.err.find("without 'param_names'") != std::string::npos);
    CHECK(r.err.find("--no-load-optim") != std::string::npos);
  }
  SECTION("resumed at its iteration, it trains on (--ckpt-format torch_dist detects too)") {
    const auto r = launch(2, tp2 + " --load " + megatron_dir.string() + " --no-load-optim --exit-interval 6");
    const auto lines = iteration_lines(r.out);
    REQUIRE(lines.size() == 1);
    CHECK(lines.begin()->first == 6);
  }
  SECTION("a torch_dist checkpoint under --ckpt-format torch: loaded with --auto-detect-ckpt-format, else refused") {
    const auto dist = scratch("dist_for_detect");
    launch(2, tp2 + " --save " + dist.string() + " --save-interval 2 --exit-interval 2");
    const auto ok = launch(2, tp2 + " --ckpt-format torch --auto-detect-ckpt-format --load " + dist.string() + " --exit-interval 3");
    CHECK(iteration_lines(ok.out).begin()->first == 3);
    const auto refused = launch(2, tp2 + " --ckpt-format torch --load " + dist.string() + " --exit-interval 3", 2);
    CHECK(refused.err.find("pass --auto-detect-ckpt-format") != std::string::npos);
  }
}

TEST_CASE("torch-format checkpoints with the distributed optimizer: distrib_optim.pt in Megatron's layout, exact resumes") {
  const std::string options = " --ckpt-format torch --use-distributed-optimizer";
  SECTION("PP2 x DP2 in bf16: saved at iteration 3 and resumed, it equals the uninterrupted run bitwise") {
    check_exact_resume(4, model_flags() + options + " --pipeline-model-parallel-size 2 --bf16", "distopt_pp2");
  }
  SECTION("TP2 x DP2: each rank's world tensors hold its slices of the torch_dist run's, in Megatron's buffer order") {
    const std::string flags = model_flags() + options + " --tensor-model-parallel-size 2 --swiglu";
    const auto torch_dir = scratch("distopt_torch"), dist_dir = scratch("distopt_dist");
    const std::string three = " --save-interval 3 --exit-interval 3";
    launch(4, flags + " --save " + torch_dir.string() + three);
    std::string dist_flags = flags;
    dist_flags.replace(dist_flags.find("--ckpt-format torch"), 19, "--ckpt-format torch_dist");
    launch(4, dist_flags + " --save " + dist_dir.string() + three);
    CHECK(fs::exists(torch_dir / "iter_0000003/mp_rank_01/distrib_optim.pt"));
    reference("distrib " + torch_dir.string() + " 3 " + dist_dir.string() + " 3");
    SECTION("without --use-distributed-optimizer its optimizer state is refused naming the flag") {
      std::string plain = flags;
      plain.erase(plain.find(" --use-distributed-optimizer"), 28);
      const auto r = launch(2, plain + " --load " + torch_dir.string() + " --exit-interval 4", 2);
      CHECK(r.err.find("was saved with --use-distributed-optimizer") != std::string::npos);
    }
  }
  SECTION("with SGD it is refused: distrib_optim.pt holds Adam's state") {
    const auto r = launch(1, model_flags() + options + " --optimizer sgd", 2);
    CHECK(r.err.find("--ckpt-format torch with --use-distributed-optimizer saves Adam's state only") != std::string::npos);
  }
}
