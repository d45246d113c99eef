// Data-parallel layout invariance end to end: pretrain_gpt alone and under `mactor -np 2` / `-np 4`
// print the same lm loss every iteration and the same validation and test losses (the global
// batch is the same; only its split over replicas and micro-batches changes).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_corpus.hpp"

using namespace mactor::test;

namespace {

std::string training_flags() {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.1 --tokenizer-type NullTokenizer --vocab-size 8192 "
         "--hidden-dropout 0 --attention-dropout 0 --log-interval 1 --eval-interval 3 --eval-iters 1 --seed 99";
}

}  // namespace

TEST_CASE("pretrain_gpt under mactor -np 2 and -np 4 logs the losses that one process logs") {
  const auto alone = run_job(1, training_flags());
  // The run must move: a layout bug that froze training would otherwise compare equal.
  CHECK(alone.train.front() != alone.train.back());
  // The spread runs' ranks share the mock indices through a folder of the job's in the temp
  // directory (training/rank_datasets.cpp): here a scratch one, empty again once each job ends.
  const auto tmp = scratch_dir("data_parallel_tmp", "mock_indices");
  std::filesystem::create_directories(tmp);
  REQUIRE(::setenv("TMPDIR", tmp.c_str(), 1) == 0);
  for (int ranks : {2, 4}) {
    const auto spread = run_job(ranks, training_flags());
    check_same(spread.train, alone.train, "lm loss", ranks);
    check_same(spread.validation, alone.validation, "validation/test lm loss", ranks);
    CHECK(std::filesystem::is_empty(tmp));
  }
}

TEST_CASE("pretrain_gpt on an EOD-masked corpus under mactor -np 2 logs the losses that one process logs") {
  // Micro-batches hold different token counts here, on different ranks; Megatron's per-micro-batch
  // scaling and DDP averaging still give the one-process gradient. The ranks share the corpus and
  // its index cache, which neither run has built before.
  const auto dir = std::filesystem::path(MACTOR_BINARY_DIR) / "tests/training/data_parallel_corpus";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "alone");
  std::filesystem::create_directories(dir / "spread");
  const auto prefix = (dir / "corpus").string();
  mactor::test::write_tiny_corpus(prefix);
  auto flags = [&](const char* cache) {
    auto f = training_flags();
    f.replace(0, std::string("--mock-data").size(), "--data-path " + prefix);
    return f + " --eod-mask-loss --split 90,10,0 --data-cache-path " + (dir / cache).string();
  };
  const auto alone = run_job(1, flags("alone"), 3);
  const auto spread = run_job(2, flags("spread"), 3);
  check_same(spread.train, alone.train, "lm loss (EOD-masked corpus)", 2);
  check_same(spread.validation, alone.validation, "validation lm loss (EOD-masked corpus)", 2);
}
