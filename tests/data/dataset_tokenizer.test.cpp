// The dataset's tokenizer (eod, pad, unique identifiers) against megatron.core.tokenizers'
// build_tokenizer on the same files (tests/data/dataset_tokenizer_reference.py), for every
// tokenizer type with no metadata, with each library and several model types in
// --tokenizer-metadata, and with bad metadata files: where Megatron fails, mactor must refuse.
#include <catch2/catch.hpp>

#include <fstream>

#include "data/data_error.hpp"
#include "data/dataset_tokenizer.hpp"
#include "data_test_util.hpp"

using namespace mactor::data;
namespace t = mactor::data::test;

namespace {

const std::vector<std::string> types = {"GPT2BPETokenizer", "HuggingFaceTokenizer", "GPTSentencePieceTokenizer",
                                        "Llama2Tokenizer",  "TikTokenizer",         "NullTokenizer"};
const std::vector<std::string> libraries = {"sentencepiece", "huggingface", "megatron", "tiktoken", "byte-level", "null"};

// The library each type loads without metadata (megatron.core.tokenizers' build_tokenizer).
std::string own_library(const std::string& type) {
  if (type == "GPT2BPETokenizer") return "megatron";
  if (type == "HuggingFaceTokenizer") return "huggingface";
  if (type == "TikTokenizer") return "tiktoken";
  if (type == "NullTokenizer") return "null";
  return "sentencepiece";
}

nlohmann::json cases() {
  using j = nlohmann::json;
  j c = j::array();
  for (const auto& type : types) {
    const auto own = own_library(type);
    c.push_back({{"type", type}, {"metadata", nullptr}});
    for (const auto& lib : libraries) c.push_back({{"type", type}, {"metadata", {{"library", lib}}}});
    for (const char* model : {"gpt", "mamba", "retro"})
      c.push_back({{"type", type}, {"metadata", {{"library", own}, {"model_type", model}}}});
    c.push_back({{"type", type}, {"metadata", {{"library", "byte-level"}, {"model_type", "gpt"}}}});
    c.push_back({{"type", type}, {"metadata", "missing"}});
    c.push_back({{"type", type}, {"metadata", {{"model_type", "gpt"}}}});
    c.push_back({{"type", type}, {"metadata", {{"library", "wordpiece"}}}});
    c.push_back({{"type", type}, {"metadata", {{"library", own}, {"model_type", "llama"}}}});
    c.push_back({{"type", type}, {"metadata", {{"library", own}, {"tokenizer_class", "MyTokenizer"}}}});
  }
  c.push_back({{"type", "HuggingFaceTokenizer"}, {"variant", "template"}, {"metadata", nullptr}});
  c.push_back({{"type", "HuggingFaceTokenizer"}, {"variant", "template"}, {"metadata", {{"library", "huggingface"}}}});
  return c;
}

const std::string sample_text =
    "Hello world! The quick brown fox, 1234 miles.\n  Twice  spaced <s> and </s> too.<|endoftext|>Next";

nlohmann::json reference() {
  const auto dir = t::scratch_dir("dataset_tokenizer");
  std::string spm_corpus;
  std::ifstream corpus(std::string(MACTOR_SOURCE_DIR) + "/data/corpus/README.md");
  for (std::string line; std::getline(corpus, line);) spm_corpus += line + "\n";
  for (int i = 0; i < 40; ++i)
    spm_corpus += "the quick brown fox " + std::to_string(i) + " jumps over the lazy dog, a journey of a thousand miles\n";
  const nlohmann::json spec = {{"corpus", std::string(MACTOR_SOURCE_DIR) + "/data/corpus"},
                               {"spm_corpus", spm_corpus},
                               {"text", sample_text},
                               {"cases", cases()}};
  std::ofstream(dir + "/spec.json") << spec.dump();
  return nlohmann::json::parse(t::run(t::python() + " " + MACTOR_SOURCE_DIR +
                                      "/tests/data/dataset_tokenizer_reference.py " + dir + "/spec.json " + dir +
                                      " 2>" + dir + "/stderr.txt"));
}

std::optional<std::string> optional_string(const nlohmann::json& v) {
  if (v.is_null()) return std::nullopt;
  return v.get<std::string>();
}

tokenizer_options options_of(const nlohmann::json& a) {
  tokenizer_options o;
  o.tokenizer_type = a["tokenizer_type"];
  o.vocab_file = optional_string(a["vocab_file"]);
  o.merge_file = optional_string(a["merge_file"]);
  o.tokenizer_model = optional_string(a["tokenizer_model"]);
  if (!a["vocab_size"].is_null()) o.vocab_size = a["vocab_size"].get<std::int64_t>();
  o.tiktoken_pattern = optional_string(a["tiktoken_pattern"]);
  o.tokenizer_metadata = optional_string(a["tokenizer_metadata"]);
  return o;
}

}  // namespace

TEST_CASE("the dataset's tokenizer takes eod, pad and identifiers from the library megatron.core.tokenizers loads") {
  const auto ref = reference();
  const auto all = cases();
  REQUIRE(ref.size() == all.size());
  int agreed = 0, refused = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const auto& r = ref[i];
    INFO("case " << all[i].dump() << "\nMegatron: " << r.dump());
    const auto o = options_of(r["args"]);
    const auto legacy = make_tokenizer(o);
    if (!r["ok"].get<bool>()) {
      CHECK_THROWS_AS(make_dataset_tokenizer(o, *legacy), data_error);
      CHECK_THROWS_AS(make_library_tokenizer(o), data_error);
      ++refused;
      continue;
    }
    const auto d = make_dataset_tokenizer(o, *legacy);
    CHECK(d.eod == r["eod"].get<std::int64_t>());
    if (r["pad"].is_null()) CHECK(!d.pad);
    else CHECK(d.pad == r["pad"].get<std::int64_t>());
    CHECK(d.identifiers.dump() == nlohmann::ordered_json::parse(r["identifiers"].get<std::string>()).dump());
    // The library tokenizes as preprocess_data then does (Llama2Tokenizer and a HuggingFace
    // template add no BOS on this path, only with --legacy-tokenizer; byte-level gives the bytes).
    if (!r["ids"].is_null()) CHECK(nlohmann::json(make_library_tokenizer(o)->tokenize(sample_text)) == r["ids"]);
    ++agreed;
  }
  // Each kind of outcome occurs: the test would pass vacuously otherwise.
  CHECK(agreed >= 6 * 4);
  CHECK(refused >= 5 * 10);
}

TEST_CASE("the legacy tokenizer flag gives the dataset the legacy tokenizer and never reads --tokenizer-metadata") {
  tokenizer_options o;
  o.tokenizer_type = "NullTokenizer";
  o.vocab_size = 100;
  o.legacy_tokenizer = true;
  const auto legacy = make_tokenizer(o);
  o.tokenizer_metadata = "/no/such/metadata.json";
  const auto d = make_dataset_tokenizer(o, *legacy);
  CHECK(d.identifiers.dump() == legacy->unique_identifiers().dump());
  CHECK(d.eod == 100);
  o.tokenizer_type = "GPT2BPETokenizer";
  o.vocab_file = std::string(MACTOR_SOURCE_DIR) + "/data/corpus/gpt2-vocab.json";
  o.merge_file = std::string(MACTOR_SOURCE_DIR) + "/data/corpus/gpt2-merges.txt";
  const auto gpt2 = make_tokenizer(o);
  CHECK_NOTHROW(make_dataset_tokenizer(o, *gpt2));
  o.legacy_tokenizer = false;
  CHECK_THROWS_WITH(make_dataset_tokenizer(o, *gpt2),
                    Catch::Contains("--tokenizer-metadata /no/such/metadata.json: no such file"));
}
