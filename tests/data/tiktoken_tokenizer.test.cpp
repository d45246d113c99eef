// TikTokenizer against tiktoken and Megatron's own classes (tests/data/tiktoken_reference.py):
// GPT-2's ranks written as Megatron's tiktoken JSON, patterns v1 and v2, Megatron's default
// (megatron.core.tokenizers) and --legacy-tokenizer paths, on given and seeded random texts.
#include <catch2/catch.hpp>

#include <fstream>

#include "data/data_error.hpp"
#include "data/tiktoken_pre_tokenizer.hpp"
#include "data/tokenizer.hpp"
#include "data_test_util.hpp"

using namespace mactor::data;
namespace t = mactor::data::test;

namespace {

std::vector<std::string> given_texts() {
  return {
      "Hello world! This is a test.",
      "I'm sure they'll say we've done it, can't you? She'd know it's John's. I'LL GO",
      "Numbers: 12345 3.14159 1,000,000 and 2024-01-01, x2 y33z \xd9\xa3\xd9\xa4 \xc2\xbd \xe2\x85\xa7",
      "a  b   c\n\n\tdef  \n ",
      "   leading spaces and trailing   ",
      "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
      "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd and \xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xac",
      "x=\xc2\xa0y\xe2\x80\x83z\r\nnext\xe2\x80\xa8line\r\n\r\n  \n",
      "!!!???...   ---   ''' \"quoted\" (parens) [brackets] {braces} a/b/c //\n/ ./run\r\n/x",
      "CamelCaseWords HTTPServer getURLFor XMLHttpRequest \xc7\x85ungla \xca\xb0" "ello e\xcc\x81t\xc3\xa9",
      "special tokens: <s>begin</s> <pad> <unk> <mask> <SPECIAL_17> <SPECIAL_999> <SPECIAL_1000> <|endoftext|> <s",
      "tab\tseparated\tvalues\t1\t2\t3",
      "\n", "   ", "", "\t\t\n\n\r\r \xe3\x80\x80x",
  };
}

struct config {
  const char* name;
  nlohmann::json spec;  // for tiktoken_reference.py
};

std::vector<config> configs() {
  using j = nlohmann::json;
  auto c = [](bool legacy, const char* pattern, j vocab_size, std::int64_t n, j specials) {
    j s = {{"legacy", legacy}, {"num_special_tokens", n}};
    if (pattern) s["pattern"] = pattern;
    if (!vocab_size.is_null()) s["vocab_size"] = vocab_size;
    if (!specials.is_null()) s["special_tokens"] = specials;
    return s;
  };
  return {
      {"v1, default path, whole vocabulary", c(false, "v1", 51256, 1000, nullptr)},
      {"v2, default path, whole vocabulary", c(false, "v2", 51256, 1000, nullptr)},
      {"v2 by default, 16 specials with a custom list, vocabulary cut to 20000",
       c(false, nullptr, 20016, 16, j{"<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>", "<|endoftext|>"})},
      {"v1, legacy path, custom list, vocabulary cut to 30000",
       c(true, "v1", 31000, 1000, j{"<unk>", "<s>", "</s>", "<|endoftext|>"})},
      {"v2, legacy path, default list", c(true, "v2", 51256, 1000, nullptr)},
  };
}

nlohmann::json reference() {
  static nlohmann::json cached;
  if (!cached.is_null()) return cached;
  auto dir = t::scratch_dir("tiktoken");
  nlohmann::json spec = {{"texts", given_texts()}, {"random_texts", 400}, {"configs", nlohmann::json::array()}};
  for (const auto& c : configs()) spec["configs"].push_back(c.spec);
  std::ofstream(dir + "/spec.json") << spec.dump();
  cached = nlohmann::json::parse(t::run(t::python() + " " + MACTOR_SOURCE_DIR + "/tests/data/tiktoken_reference.py " +
                                        dir + "/spec.json " + dir + " 2>/dev/null"));
  return cached;
}

tokenizer_options options_of(const nlohmann::json& s, const std::string& vocab) {
  tokenizer_options o;
  o.tokenizer_type = "TikTokenizer";
  o.tokenizer_model = vocab;
  o.legacy_tokenizer = s["legacy"].get<bool>();
  o.tiktoken_num_special_tokens = s["num_special_tokens"].get<std::int64_t>();
  if (s.contains("pattern")) o.tiktoken_pattern = s["pattern"].get<std::string>();
  if (s.contains("vocab_size")) o.vocab_size = s["vocab_size"].get<std::int64_t>();
  if (s.contains("special_tokens")) o.tiktoken_special_tokens = s["special_tokens"].get<std::vector<std::string>>();
  return o;
}

}  // namespace

TEST_CASE("TikTokenizer ids equal tiktoken's and Megatron's on both code paths and both patterns") {
  const auto ref = reference();
  const auto texts = ref["texts"].get<std::vector<std::string>>();
  REQUIRE(texts.size() > 400);
  const auto cs = configs();
  std::size_t tokens = 0;
  for (std::size_t k = 0; k < cs.size(); ++k) {
    INFO("config: " << cs[k].name);
    const auto& r = ref["configs"][k];
    auto tok = make_tokenizer(options_of(cs[k].spec, ref["vocab"].get<std::string>()));
    CHECK(tok->vocab_size() == r["vocab_size"].get<std::int64_t>());
    CHECK(tok->eod() == r["eod"].get<std::int64_t>());
    CHECK(nlohmann::json(tok->pad() ? nlohmann::json(*tok->pad()) : nlohmann::json()) == r["pad"]);
    CHECK(tok->unique_identifiers().dump() == r["unique_identifiers"].get<std::string>());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      INFO("text " << i << ": " << nlohmann::json(texts[i]).dump());
      const auto ids = tok->tokenize(texts[i]);
      CHECK(nlohmann::json(ids) == r["ids"][i]);
      CHECK(tok->detokenize(ids) == texts[i]);
      tokens += ids.size();
    }
  }
  CHECK(tokens > 10000);
}

TEST_CASE("TikTokenizer pre-tokenizer pieces equal the regex package's for patterns v1 and v2") {
  const auto ref = reference();
  const auto texts = ref["texts"].get<std::vector<std::string>>();
  const auto cs = configs();
  for (std::size_t k : {0, 1}) {
    const auto p = parse_tiktoken_pattern(cs[k].spec["pattern"].get<std::string>());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      INFO("pattern " << cs[k].spec["pattern"] << ", text " << i << ": " << nlohmann::json(texts[i]).dump());
      std::vector<std::string> pieces;
      for (auto v : tiktoken_pre_tokenize(texts[i], p)) pieces.emplace_back(v);
      CHECK(nlohmann::json(pieces) == ref["configs"][k]["pieces"][i]);
    }
  }
}

TEST_CASE("TikTokenizer refuses bad vocabularies and flags with the file and the fix") {
  const auto ref = reference();
  const auto vocab = ref["vocab"].get<std::string>();
  auto opts = [&](std::string file) {
    tokenizer_options o;
    o.tokenizer_type = "TikTokenizer";
    o.tokenizer_model = file;
    o.vocab_size = 51256;
    return o;
  };
  CHECK_THROWS_WITH(make_tokenizer(opts("/nonexistent/vocab.json")), Catch::Contains("--tokenizer-model=/nonexistent/vocab.json"));
  CHECK_THROWS_WITH(make_tokenizer(opts("/x/cl100k.tiktoken")), Catch::Contains("only .json"));
  const auto dir = t::scratch_dir("tiktoken_bad");
  std::ofstream(dir + "/bad.json") << R"([{"rank": 0, "token_bytes": "AA==", "token_str": ""}, {"rank": 5, "token_bytes": "AQ==", "token_str": ""}])";
  CHECK_THROWS_WITH(make_tokenizer(opts(dir + "/bad.json")), Catch::Contains(dir + "/bad.json: entry 1 has rank 5"));
  std::ofstream(dir + "/trunc.json") << R"([{"rank": 0, "token_bytes": "AA==")";
  CHECK_THROWS_WITH(make_tokenizer(opts(dir + "/trunc.json")), Catch::Contains("not valid JSON"));
  auto o = opts(vocab);
  o.vocab_size.reset();  // Megatron's default 2**17 needs more entries than GPT-2 has
  CHECK_THROWS_WITH(make_tokenizer(o), Catch::Contains("pass --vocab-size 51256 or less"));
  o = opts(vocab);
  o.legacy_tokenizer = true;
  CHECK_THROWS_WITH(make_tokenizer(o), Catch::Contains("--tiktoken-pattern"));
  o = opts(vocab);
  o.tiktoken_special_tokens = std::vector<std::string>{"<unk>", "<s>", "</s>"};
  CHECK_THROWS_WITH(make_tokenizer(o), Catch::Contains("<mask> is missing"));
  o.legacy_tokenizer = true;
  o.tiktoken_pattern = "v3";
  CHECK_THROWS_WITH(make_tokenizer(o), Catch::Contains("use v1 or v2"));
  o.tiktoken_pattern = "v1";
  CHECK_NOTHROW(make_tokenizer(o));
}
