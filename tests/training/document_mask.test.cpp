// --reset-attention-mask: the dataset's document mask reaches the attention (the kernel itself is
// checked against Megatron's mask in tests/kernels/attention.test.cpp): the batch loader's document
// starts against the tokens' EODs, and training runs that use it, ignore it where Megatron does,
// and keep the one-process losses under TP, PP and CP.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "data/blended_dataset.hpp"
#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_corpus.hpp"
#include "training/batch_loader.hpp"

using namespace mactor;
using namespace mactor::test;

namespace {

// NullTokenizer adds EOD: 8192 tokens, a multiple of 128 x tp, so every layout pads alike.
constexpr std::int64_t eod = 8191;

std::string flags() {
  return "--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 6 --lr 1e-2 "
         "--init-method-std 0.1 --tokenizer-type NullTokenizer --vocab-size 8191 --hidden-dropout 0 "
         "--attention-dropout 0 --log-interval 1 --eval-interval 3 --eval-iters 1 --seed 7 --split 90,10,0";  // no test split
}

}  // namespace

TEST_CASE("the batch loader turns the dataset's reset-attention-mask mask into each position's document start") {
  const auto dir = scratch_dir("document_mask", "loader");
  std::filesystem::create_directories(dir);
  const auto prefix = (dir / "corpus").string();
  write_tiny_corpus(prefix, 400, eod);
  data::gpt_dataset_config c;
  c.sequence_length = 32;
  c.split = "1,0,0";
  c.blend = data::data_blend{{prefix}, {}};
  c.reset_attention_mask = true;
  c.eod = eod;
  c.write_cache = false;
  const auto train = data::build_gpt_datasets(c, {std::int64_t{40}, std::nullopt, std::nullopt})[0];
  REQUIRE(train);
  const training::batch_loader loader(train, 2, 8192);
  int resets = 0;
  for (std::int64_t consumed = 0; consumed < 20; consumed += 2) {
    const auto b = loader.load(consumed);
    REQUIRE(b.document_start.size() == b.tokens.size());
    for (int row = 0; row < 2; ++row)
      for (int p = 0, start = 0; p < 32; ++p) {  // after an EOD at q, positions q+1.. start a document
        INFO("sample " << consumed + row << " position " << p);
        CHECK(b.document_start[std::size_t(row) * 32 + p] == start);
        if (b.tokens[std::size_t(row) * 32 + p] == eod) start = p + 1, ++resets;
      }
  }
  CHECK(resets > 20);
  // Without the flag the mask is causal and no document mask is passed on.
  c.reset_attention_mask = false;
  const auto causal = data::build_gpt_datasets(c, {std::int64_t{40}, std::nullopt, std::nullopt})[0];
  CHECK(training::batch_loader(causal, 2, 8192).load(0).document_start.empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("reset-attention-mask changes training where Megatron's mask reaches the attention and keeps layouts") {
  const auto dir = scratch_dir("document_mask", "train");
  std::filesystem::create_directories(dir);
  const auto prefix = (dir / "corpus").string();
  write_tiny_corpus(prefix, 2000, eod);
  const std::string base = flags() + " --data-path " + prefix + " --data-cache-path " + (dir / "cache").string();
  const auto plain = run_job(1, base, 3);
  const auto masked = run_job(1, base + " --reset-attention-mask", 3);
  CHECK(masked.train[0] != plain.train[0]);  // the first step's forward already differs
  // No mask from the dataloader: Megatron's attention falls back to the causal mask.
  const auto unmasked = run_job(1, base + " --reset-attention-mask --no-create-attention-mask-in-dataloader", 3);
  CHECK(unmasked.train == plain.train);
  // A sliding window replaces the given mask in Megatron's softmax.
  const std::string window = " --window-size 8,0";
  CHECK(run_job(1, base + window + " --reset-attention-mask", 3).train == run_job(1, base + window, 3).train);
  for (const auto& [ranks, layout] : {std::pair{2, std::string("--tensor-model-parallel-size 2 --sequence-parallel")},
                                      std::pair{2, std::string("--pipeline-model-parallel-size 2")},
                                      std::pair{2, std::string("--context-parallel-size 2")},  // ring: all-gathers
                                      std::pair{2, std::string("--context-parallel-size 2 --cp-comm-type a2a")}})
    check_layout_against(masked, ranks, base + " --reset-attention-mask", layout, 3, 6);
  std::filesystem::remove_all(dir);
}
