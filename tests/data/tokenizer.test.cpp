// Tests for data/tokenizer*: GPT-2 BPE against tiktoken (whisper's GPT-2 ranks), tokenizer.json
// against HF tokenizers, SentencePiece against the sentencepiece package, NullTokenizer by hand.
#include "data/tokenizer.hpp"

#include <catch2/catch.hpp>

#include "data/byte_level_bpe.hpp"
#include "data/data_error.hpp"
#include "data_test_util.hpp"

using namespace mactor::data;
namespace t = mactor::data::test;

namespace {

const std::string corpus_dir = std::string(MACTOR_SOURCE_DIR) + "/data/corpus";

std::vector<std::string> varied_texts() {
  return {
      "Hello world! This is a test.",
      "I'm sure they'll say we've done it, can't you? She'd know it's John's.",
      "Numbers: 12345 3.14159 1,000,000 and 2024-01-01, x2 y33z",
      "a  b   c\n\n\tdef  \n ",
      "   leading spaces and trailing   ",
      "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
      "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd and \xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xac \xd0\xa0\xd1\x83\xd1\x81\xd1\x81\xd0\xba\xd0\xb8\xd0\xb9",
      "x=\xc2\xa0y\xe2\x80\x83z\r\nnext\u2028line",
      "!!!???...   ---   ''' \"quoted\" (parens) [brackets] {braces}",
      "The <|endoftext|> marker inside text",
      "Don't   stop\t\tbelieving\n\n\n   Hold on",
      "   ",
      "\n",
      "CamelCaseWords and snake_case_words and UPPERCASE 'S 'LL",
      "tab\tseparated\tvalues\t1\t2\t3",
  };
}

nlohmann::json reference(const std::vector<std::string>& texts) {
  static nlohmann::json cached;
  if (!cached.is_null()) return cached;
  auto dir = t::scratch_dir("tokenizers");
  std::string spm_corpus;
  for (int k = 0; k < 40; ++k)
    for (const auto& s : texts) spm_corpus += s.empty() || s.find_first_not_of(" \n\t\r") == std::string::npos ? "" : s + "\n";
  spm_corpus += "the quick brown fox jumps over the lazy dog\nA journey of a thousand miles begins with a single step\n";
  nlohmann::json spec = {{"texts", texts}, {"vocab", corpus_dir + "/gpt2-vocab.json"},
                         {"merges", corpus_dir + "/gpt2-merges.txt"}, {"spm_corpus", spm_corpus}};
  std::ofstream(dir + "/spec.json") << spec.dump();
  cached = nlohmann::json::parse(t::run(t::python() + " " + MACTOR_SOURCE_DIR + "/tests/data/tokenizer_reference.py " +
                                        dir + "/spec.json " + dir));
  return cached;
}

}  // namespace

TEST_CASE("GPT-2 BPE ids equal tiktoken's with whisper's GPT-2 ranks, and decode back to the text") {
  const auto texts = varied_texts();
  auto ref = reference(texts);
  auto tok = make_gpt2_bpe_tokenizer(corpus_dir + "/gpt2-vocab.json", corpus_dir + "/gpt2-merges.txt");
  CHECK(tok->vocab_size() == 50257);
  CHECK(tok->eod() == 50256);
  CHECK_FALSE(tok->pad().has_value());
  CHECK(tok->unique_identifiers()["tokenizer_path"] ==
        nlohmann::ordered_json({corpus_dir + "/gpt2-vocab.json", corpus_dir + "/gpt2-merges.txt"}));
  for (std::size_t i = 0; i < texts.size(); ++i) {
    INFO("text " << i << ": " << texts[i]);
    auto ids = tok->tokenize(texts[i]);
    CHECK(nlohmann::json(ids) == ref["tiktoken"][i]);
    CHECK(tok->detokenize(ids) == texts[i]);
  }
}

TEST_CASE("a BPE tokenizer.json encodes as HF tokenizers does, added tokens included") {
  const auto texts = varied_texts();
  auto ref = reference(texts);
  auto tok = make_huggingface_tokenizer(ref["hf_json"].get<std::string>());
  CHECK(tok->eod() == 50256);
  CHECK(tok->vocab_size() == 50257);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    INFO("text " << i << ": " << texts[i]);
    CHECK(nlohmann::json(tok->tokenize(texts[i])) == ref["hf"][i]);
  }
}

TEST_CASE("SentencePiece tokenizers match the sentencepiece package and set bos, eos and pad like Megatron") {
  const auto texts = varied_texts();
  auto ref = reference(texts);
  const auto model = ref["spm_model"].get<std::string>();
  auto gpt = make_gpt_sentencepiece_tokenizer(model);
  auto llama = make_llama2_tokenizer(model);
  CHECK(gpt->eod() == ref["spm_ids"]["eos"].get<std::int64_t>());
  CHECK(gpt->pad() == ref["spm_ids"]["pad"].get<std::int64_t>());
  CHECK(gpt->vocab_size() == ref["spm_ids"]["size"].get<std::int64_t>());
  CHECK(gpt->unique_identifiers().dump() ==
        R"({"class":"_GPTSentencePieceTokenizer","tokenizer_path":[")" + model + R"("],"vocab_extra_ids":"0"})");
  for (std::size_t i = 0; i < texts.size(); ++i) {
    INFO("text " << i);
    auto ids = gpt->tokenize(texts[i]);
    CHECK(nlohmann::json(ids) == ref["spm"][i]);
    CHECK(gpt->detokenize(ids) == ref["spm_decoded"][i].get<std::string>());
    auto lids = llama->tokenize(texts[i]);
    REQUIRE(!lids.empty());
    CHECK(lids[0] == ref["spm_ids"]["bos"].get<std::int64_t>());
    CHECK(std::vector<std::int64_t>(lids.begin() + 1, lids.end()) == ids);
  }
  CHECK_THROWS_WITH(make_llama2_tokenizer("/nonexistent.model"), Catch::Contains("--tokenizer-model=/nonexistent.model"));
}

TEST_CASE("NullTokenizer reads space-separated ids and puts eod one past the vocabulary") {
  auto tok = make_null_tokenizer(100);
  CHECK(tok->vocab_size() == 101);
  CHECK(tok->eod() == 100);
  CHECK(tok->tokenize("1 2 3 99") == std::vector<std::int64_t>{1, 2, 3, 99});
  CHECK(tok->detokenize({5, 6}) == "5 6");
  // MegatronLegacyTokenizer(None, vocab_size=100).unique_identifiers
  CHECK(tok->unique_identifiers().dump() == R"({"class":"_NullTokenizer","tokenizer_path":[null],"vocab_size":"100"})");
  CHECK_THROWS_AS(tok->tokenize("1  2"), data_error);  // Python's int('') fails too
  auto of_type = [](const char* type) {
    tokenizer_options o;
    o.tokenizer_type = type;
    return o;
  };
  CHECK_THROWS_WITH(make_tokenizer(of_type("NullTokenizer")), Catch::Contains("--vocab-size"));
  CHECK_THROWS_WITH(make_tokenizer(of_type("GPT2BPETokenizer")), Catch::Contains("--vocab-file"));
  CHECK_THROWS_WITH(make_tokenizer(of_type("BertWordPieceCase")), Catch::Contains("not supported"));
}

TEST_CASE("the pre-tokenizer gives a whitespace run's last space to the following word") {
  std::unordered_map<std::string, std::int64_t> vocab;
  for (int b = 0; b < 256; ++b) vocab[byte_to_unicode()[b]] = b;
  byte_level_bpe bpe(vocab, {}, "bytes");
  using v = std::vector<std::string>;
  CHECK(bpe.pre_tokenize("a   b") == v{"a", "  ", " b"});
  CHECK(bpe.pre_tokenize("a \n\nb  ") == v{"a", " \n", "\n", "b", "  "});
  CHECK(bpe.pre_tokenize("it's 42!?") == v{"it", "'s", " 42", "!?"});
  CHECK(bpe.pre_tokenize("x\xc2\xa0y") == v{"x", "\xc2\xa0", "y"});
  std::vector<std::int64_t> ids;
  bpe.encode("hi", ids);
  CHECK(ids == std::vector<std::int64_t>{'h', 'i'});
}
