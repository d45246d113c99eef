// --full-validation and --multiple-validation-sets end to end through pretrain_gpt: what each
// evaluation reads, the blocks and TensorBoard tags of several sets, and the refusals.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <regex>
#include <string>
#include <vector>

#include "data/indexed_dataset.hpp"
#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_corpus.hpp"

using namespace mactor::test;

namespace {

constexpr int seq_length = 32, global_batch = 4;

std::string flags(const std::string& lr) {
  return "--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length " +
         std::to_string(seq_length) + " --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size " +
         std::to_string(global_batch) + " --train-iters 6 " + lr +
         " --init-method-std 0.1 --tokenizer-type NullTokenizer --vocab-size 8192 --hidden-dropout 0 "
         "--attention-dropout 0 --log-interval 1 --eval-interval 3 --eval-iters 1 --seed 7";
}

// One epoch of a GPT dataset over every document of `prefix`: Megatron's samples per epoch,
// (tokens - 1) // seq_length, counted here from the index file alone.
std::int64_t samples_in(const std::string& prefix) {
  mactor::data::indexed_dataset d(prefix);
  const auto& lengths = d.sequence_lengths();
  const std::int64_t tokens = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
  return (tokens - 1) / seq_length;
}

// The validation blocks "validation[-k] loss at <prefix> | lm loss value: v", in log order (the
// test split's block, "... on test set", left out).
std::vector<std::pair<std::string, double>> validation_blocks(const std::string& log) {
  std::vector<std::pair<std::string, double>> blocks;
  static const std::regex block(R"( (validation(?:-\d+)?) loss at ([^|]*)\| lm loss value: ([-+0-9.eE]+) \|)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), block); it != std::sregex_iterator(); ++it)
    if ((*it)[2].str().find("on test set") == std::string::npos)
      blocks.emplace_back((*it)[1].str() + " at " + (*it)[2].str(), std::stod((*it)[3].str()));
  return blocks;
}

bool file_holds(const std::filesystem::path& folder, const std::string& text) {
  for (const auto& f : std::filesystem::recursive_directory_iterator(folder)) {
    std::ifstream in(f.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("full-validation evaluates the whole validation set from its start at every evaluation") {
  const auto dir = scratch_dir("validation_sets", "full");
  std::filesystem::create_directories(dir);
  const auto train = (dir / "train").string(), valid = (dir / "valid").string();
  write_tiny_corpus(train);
  write_tiny_corpus(valid, 150);
  const std::string data = " --train-data-path " + train + " --valid-data-path " + valid + " --test-data-path " + train +
                           " --data-cache-path " + (dir / "cache").string();

  // Frozen weights (--lr 0): every full validation reads the same samples, so every block is equal;
  // and equal to evaluating ⌊samples / global batch⌋ batches from the start with --skip-train (with
  // --eval-interval past --train-iters, its validation set is asked for less than one epoch: built
  // as one epoch, the same shuffled samples).
  const auto full = launch(1, flags("--lr 0") + data + " --full-validation");
  const auto blocks = validation_blocks(full.out);
  REQUIRE(blocks.size() == 3);  // iterations 3 and 6, then the final one on the validation set
  CHECK(blocks[0].first == "validation at iteration 3 ");
  CHECK(blocks[1].second == blocks[0].second);
  CHECK(blocks[2].second == blocks[0].second);
  const auto passes = samples_in(valid) / global_batch;
  REQUIRE(passes > 10);
  const auto whole = launch(1, flags("--lr 0") + data + " --skip-train --eval-interval 100 --eval-iters " +
                                  std::to_string(passes));
  const auto reference = validation_blocks(whole.out);
  REQUIRE(reference.size() >= 1);
  CHECK(reference[0].second == blocks[0].second);
  // Without it, each evaluation reads the next --eval-iters batches: different samples, losses.
  const auto partial = validation_blocks(launch(1, flags("--lr 0") + data).out);
  REQUIRE(partial.size() == 3);
  CHECK(partial[1].second != partial[0].second);
  std::filesystem::remove_all(dir);
}

TEST_CASE("multiple-validation-sets evaluates and logs each validation prefix as its own set") {
  const auto dir = scratch_dir("validation_sets", "multiple");
  std::filesystem::create_directories(dir);
  const auto train = (dir / "train").string(), v0 = (dir / "v0").string(), v1 = (dir / "v1").string();
  write_tiny_corpus(train);
  write_tiny_corpus(v0, 120);
  write_tiny_corpus(v1, 260, 8192);
  const std::string common = flags("--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2") +
                             " --full-validation --train-data-path " + train + " --test-data-path " + train +
                             " --data-cache-path " + (dir / "cache").string();

  // Each set's blocks equal a run validating on that set alone; over two data-parallel ranks.
  const auto tb = dir / "tb";
  const auto both = launch(2, common + " --multiple-validation-sets --valid-data-path " + v0 + " " + v1 +
                                  " --tensorboard-dir " + tb.string());
  const auto blocks = validation_blocks(both.out);
  const auto alone0 = validation_blocks(launch(1, common + " --valid-data-path " + v0).out);
  const auto alone1 = validation_blocks(launch(1, common + " --valid-data-path " + v1).out);
  REQUIRE(blocks.size() == 6);
  REQUIRE(alone0.size() == 3);
  REQUIRE(alone1.size() == 3);
  for (int e = 0; e < 3; ++e) {
    CHECK(blocks[2 * e].first.rfind("validation-0 at ", 0) == 0);
    CHECK(blocks[2 * e + 1].first.rfind("validation-1 at ", 0) == 0);
    CHECK(blocks[2 * e].second == Approx(alone0[e].second).epsilon(1e-5));
    CHECK(blocks[2 * e + 1].second == Approx(alone1[e].second).epsilon(1e-5));
  }
  CHECK(blocks[0].second != blocks[1].second);
  // The test split is one set, printed as before.
  CHECK(both.out.find(" validation loss at iteration 6 on test set | ") != std::string::npos);
  CHECK(file_holds(tb, "lm loss validation-1 vs samples"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("validation sets that cannot be evaluated are refused with the fix") {
  const auto dir = scratch_dir("validation_sets", "refused");
  std::filesystem::create_directories(dir);
  const auto train = (dir / "train").string(), small = (dir / "small").string();
  write_tiny_corpus(train);
  write_tiny_corpus(small, 3);
  const std::string data = " --train-data-path " + train + " --test-data-path " + train + " --data-cache-path " +
                           (dir / "cache").string();
  auto r = launch(1, flags("--lr 0") + data + " --valid-data-path " + train + " " + small + " --multiple-validation-sets", 2);
  CHECK(r.err.find("--multiple-validation-sets currently requires --full-validation") != std::string::npos);
  r = launch(1, flags("--lr 0") + data + " --valid-data-path " + small + " --full-validation", 2);
  CHECK(r.err.find("--full-validation: validation set 0 has") != std::string::npos);
  CHECK(r.err.find("fewer than one global batch (4)") != std::string::npos);
  std::filesystem::remove_all(dir);
}
