// --tokenizer-metadata end to end through pretrain_gpt: the metadata's library and model class
// reach the dataset (its eod and pad mask the loss; its class is hashed into the index cache's
// names), --legacy-tokenizer ignores it, and a missing file is a user error. The ids themselves
// are checked against megatron.core.tokenizers in tests/data/dataset_tokenizer.test.cpp.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_corpus.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

// A 300-piece SentencePiece model (pad 0, unk 1, bos 2, eos 3) trained by the sentencepiece package.
std::string train_sentencepiece(const fs::path& dir) {
  std::ofstream corpus(dir / "corpus.txt");
  for (int i = 0; i < 400; ++i)
    corpus << "line " << i << ": the quick brown fox jumps over the lazy dog, " << i * 7919 % 1000
           << " miles of a thousand-mile journey begin with one step\n";
  corpus.close();
  const std::string venv = std::string(MACTOR_SOURCE_DIR) + "/.venv/bin/python";
  const std::string python = fs::exists(venv) ? venv : "python3";
  const auto r = run_shell(python + " -c \"import sentencepiece as s; s.SentencePieceTrainer.train(input='" +
                           (dir / "corpus.txt").string() + "', model_prefix='" + (dir / "spm").string() +
                           "', vocab_size=300, model_type='bpe', pad_id=0, unk_id=1, bos_id=2, eos_id=3, "
                           "character_coverage=1.0, minloglevel=2)\"");
  INFO(r.err);
  REQUIRE(r.status == 0);
  return (dir / "spm.model").string();
}

std::string flags(const std::string& model, const std::string& data, const fs::path& cache) {
  return "--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 4 --lr 1e-3 "
         "--init-method-std 0.1 --tokenizer-type GPTSentencePieceTokenizer --tokenizer-model " + model +
         " --data-path " + data + " --split 100,0,0 --eod-mask-loss --data-cache-path " + cache.string() +
         " --hidden-dropout 0 --attention-dropout 0 --log-interval 1 --eval-interval 100 --eval-iters 0 --seed 7";
}

void write_json(const fs::path& p, const nlohmann::json& j) { std::ofstream(p) << j.dump(); }

// The tokenizer class hashed into the one training-split description in `cache`.
std::string described_tokenizer_class(const fs::path& cache) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(cache))
    if (e.path().string().find("-GPTDataset-train-description.txt") != std::string::npos) found.push_back(e.path());
  REQUIRE(found.size() == 1);
  std::ifstream in(found[0]);
  return nlohmann::json::parse(in)["tokenizer"]["class"].get<std::string>();
}

}  // namespace

TEST_CASE("tokenizer-metadata decides the dataset tokenizer's library and class, as Megatron's default path") {
  const auto dir = scratch_dir("tokenizer_metadata", "run");
  fs::create_directories(dir);
  const auto model = train_sentencepiece(dir);
  const std::string data = (dir / "corpus").string();
  write_tiny_corpus(data, 400, /*eod=*/3, /*tokens=*/300);  // ids 0 (pad) and 1 occur in the text
  write_json(dir / "gpt.json", {{"library", "sentencepiece"}, {"model_type", "gpt"}});
  write_json(dir / "bytes.json", {{"library", "byte-level"}});

  const auto plain = parse_losses(launch(1, flags(model, data, dir / "cache_plain")).out).train;
  const auto gpt = parse_losses(launch(1, flags(model, data, dir / "cache_gpt") + " --tokenizer-metadata " +
                                          (dir / "gpt.json").string()).out).train;
  const auto bytes = parse_losses(launch(1, flags(model, data, dir / "cache_bytes") + " --tokenizer-metadata " +
                                            (dir / "bytes.json").string()).out).train;
  REQUIRE(plain.size() == 4);
  // Same library: the same eod and pad, so the same losses; only the class (and so the cache's
  // file names) differ.
  CHECK(gpt == plain);
  CHECK(described_tokenizer_class(dir / "cache_plain") == "megatron.core.tokenizers.text.models.default_tokenizer.DefaultTokenizerText");
  CHECK(described_tokenizer_class(dir / "cache_gpt") == "megatron.core.tokenizers.text.models.gpt_tokenizer.GPTTokenizer");
  // byte-level: eod 0 and pad 1 instead of 3 and 0, so other tokens leave the loss.
  REQUIRE(bytes.size() == 4);
  CHECK(bytes[0] != plain[0]);

  // --legacy-tokenizer never reads the metadata: a missing file trains, with the legacy class.
  const std::string missing = " --tokenizer-metadata " + (dir / "none.json").string();
  const auto legacy = parse_losses(launch(1, flags(model, data, dir / "cache_legacy") + " --legacy-tokenizer" + missing).out).train;
  CHECK(legacy == plain);
  CHECK(described_tokenizer_class(dir / "cache_legacy") == "_GPTSentencePieceTokenizer");
  // Without it a missing file is the user's error.
  const auto r = launch(1, flags(model, data, dir / "cache_missing") + missing, 2);
  CHECK(r.err.find("--tokenizer-metadata " + (dir / "none.json").string() + ": no such file") != std::string::npos);
}
