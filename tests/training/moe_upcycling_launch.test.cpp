// --moe-use-upcycling against a second implementation of Megatron-Core's upcycling_utils written
// here: a dense model trained 4 iterations and saved is upcycled into a MoE model, which saves
// itself at iteration 1 and trains on.
//   - g = 1 (every expert a copy of the dense MLP, softmax over the top 2): the MoE model computes
//     the dense model's function, so its first iteration logs the loss the dense model logs at
//     its 5th (the same data: the dense checkpoint's consumed samples carry over).
//   - g = 2 with --moe-router-pre-softmax, grouped-GEMM names (bf16, as Megatron's grouped GEMM
//     requires) and EP2: each expert's saved weights equal slice e % 2 of the dense MLP times
//     (E g / topk)^(1/3) to bf16 rounding, and router rows 2i and 2i + 1 agree.
//   - Refused with exit status 2: a --save that holds a checkpoint (Megatron's assertion), and a
//     --moe-upcycling-granularity the checkpoint does not have.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "checkpoint/checkpoint_reader.hpp"
#include "tests/training/launch_support.hpp"

using namespace mactor::test;
namespace ck = mactor::checkpoint;

namespace {

const std::string model = "--mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16 "
                          "--max-position-embeddings 16 --micro-batch-size 2 --global-batch-size 4 --lr 1e-2 "
                          "--tokenizer-type NullTokenizer --vocab-size 8191 --log-interval 1 --eval-iters 0 --seed 5 "
                          "--normalization RMSNorm --swiglu --disable-bias-linear --position-embedding-type rope "
                          "--untie-embeddings-and-output-weights";

// The dense model (FFN 64) trained 5 iterations, saved at 4; its logged losses.
std::vector<double> train_dense(const std::string& dir) {
  return parse_losses(launch(1, model + " --ffn-hidden-size 64 --train-iters 5 --save " + dir + " --save-interval 4").out).train;
}

// The expert weight upcycling_utils makes from the dense fc (a [rows, cols] matrix): fc1's rows
// split as [gate; up], each half in g blocks, block r of both; fc2's columns in g blocks.
std::vector<float> expected_expert(const std::vector<float>& dense, std::int64_t rows, std::int64_t cols, int linear,
                                   int g, int r, double scale) {
  std::vector<float> out;
  if (linear == 1) {
    const std::int64_t half = rows / 2, part = half / g;
    for (std::int64_t h : {std::int64_t(0), half})
      for (std::int64_t i = h + r * part; i < h + (r + 1) * part; ++i)
        for (std::int64_t c = 0; c < cols; ++c) out.push_back(float(dense[std::size_t(i * cols + c)] * scale));
  } else {
    const std::int64_t part = cols / g;
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t c = r * part; c < (r + 1) * part; ++c) out.push_back(float(dense[std::size_t(i * cols + c)] * scale));
  }
  return out;
}

}  // namespace

TEST_CASE("an upcycled MoE model of identical experts logs the dense model's next loss") {
  const auto dense_dir = scratch_dir("moe_upcycling", "dense_g1"), moe_dir = scratch_dir("moe_upcycling", "moe_g1");
  const auto dense = train_dense(dense_dir.string());
  REQUIRE(dense.size() == 5);
  const auto r = launch(1, model + " --ffn-hidden-size 64 --train-iters 4 --load " + dense_dir.string() +
                               " --ckpt-step 4 --save " + moe_dir.string() +
                               " --save-interval 100 --moe-use-upcycling --num-experts 4 --moe-router-topk 2");
  CHECK(r.out.find("Upcycled checkpoint saved to " + moe_dir.string()) != std::string::npos);
  const auto moe = parse_losses(r.out).train;
  REQUIRE(moe.size() == 3);  // iterations 2 to 4
  check_same({moe[0]}, {dense[4]}, "upcycled MoE's first loss vs the dense model's 5th", 1, 1e-6);
  ck::checkpoint_reader saved(moe_dir.string(), 1);
  ck::checkpoint_reader original(dense_dir.string(), 4);
  for (int e = 0; e < 4; ++e)
    CHECK(saved.read_whole("decoder.layers.1.mlp.experts.local_experts." + std::to_string(e) + ".linear_fc2.weight") ==
          original.read_whole("decoder.layers.1.mlp.linear_fc2.weight"));
}

TEST_CASE("upcycling with granularity 2 and pre-softmax routing under EP2 slices and scales the dense MLP as Megatron does") {
  const auto dense_dir = scratch_dir("moe_upcycling", "dense_g2"), moe_dir = scratch_dir("moe_upcycling", "moe_g2");
  train_dense(dense_dir.string());
  const std::string moe = model + " --ffn-hidden-size 32 --moe-upcycling-granularity 2 --train-iters 3 --load " +
                          dense_dir.string() + " --ckpt-step 4 --save " + moe_dir.string() +
                          " --save-interval 100 --moe-use-upcycling --num-experts 4 --moe-router-topk 2 "
                          "--moe-router-pre-softmax --moe-grouped-gemm --bf16 --expert-model-parallel-size 2";
  const auto losses = parse_losses(launch(2, moe).out).train;
  REQUIRE(losses.size() == 2);
  for (double l : losses) CHECK(std::isfinite(l));
  ck::checkpoint_reader saved(moe_dir.string(), 1), original(dense_dir.string(), 4);
  const double scale = std::cbrt(4.0 * 2 / 2);  // (E g / topk)^(1/3): a gated MLP
  for (int layer = 0; layer < 2; ++layer) {
    const std::string at = "decoder.layers." + std::to_string(layer) + ".mlp.";
    for (int linear : {1, 2}) {
      const auto name = at + "linear_fc" + std::to_string(linear) + ".weight";
      const auto shape = original.global_shape(name);
      const auto dense = original.read_whole(name);
      for (int e = 0; e < 4; ++e) {
        INFO(name << " expert " << e);
        const auto got = saved.read_whole(at + "experts.linear_fc" + std::to_string(linear) + ".weight" + std::to_string(e));
        const auto want = expected_expert(dense, shape[0], shape[1], linear, 2, e % 2, scale);
        REQUIRE(got.size() == want.size());
        // The main parameters come from the bf16 model's weights (no optimizer state is loaded).
        double worst = 0;
        for (std::size_t i = 0; i < got.size(); ++i)
          worst = std::max(worst, double(std::abs(got[i] - want[i])) / (std::abs(want[i]) + 1e-12));
        CHECK(worst <= 1.0 / 256);
      }
    }
    const auto router = saved.read_whole(at + "router.weight");  // [4, 32]: rows 0 = 1, 2 = 3
    for (int row : {0, 2})
      CHECK(std::vector<float>(router.begin() + row * 32, router.begin() + (row + 1) * 32) ==
            std::vector<float>(router.begin() + (row + 1) * 32, router.begin() + (row + 2) * 32));
    CHECK(std::vector<float>(router.begin(), router.begin() + 32) != std::vector<float>(router.begin() + 64, router.begin() + 96));
  }
}

TEST_CASE("upcycling refuses a --save that holds a checkpoint and a granularity the dense checkpoint lacks") {
  const auto dense_dir = scratch_dir("moe_upcycling", "dense_bad");
  train_dense(dense_dir.string());
  const std::string upcycle = model + " --train-iters 3 --load " + dense_dir.string() +
                              " --save-interval 100 --moe-use-upcycling --num-experts 4 --moe-router-topk 2";
  auto r = launch(1, upcycle + " --ffn-hidden-size 64 --save " + dense_dir.string(), 2);
  CHECK(r.err.find("The upcycling destination directory already exists") != std::string::npos);
  r = launch(1, upcycle + " --ffn-hidden-size 32 --save " + scratch_dir("moe_upcycling", "moe_bad").string(), 2);
  CHECK(r.err.find("--moe-upcycling-granularity") != std::string::npos);
}
