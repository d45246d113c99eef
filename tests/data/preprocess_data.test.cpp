// Tests for tools/preprocess_data: output equals Megatron's Encoder (tiktoken GPT-2 ids + eod, per
// sentence lengths) read back through megatron-core; flags and errors behave like argparse's.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "data/indexed_dataset.hpp"
#include "data_test_util.hpp"

namespace t = mactor::data::test;
using namespace mactor::data;

namespace {

const std::string tool = std::string(MACTOR_BINARY_DIR) + "/bin/preprocess_data";
const std::string corpus = std::string(MACTOR_SOURCE_DIR) + "/data/corpus";

// Runs the tool; returns (exit status, stderr+stdout).
std::pair<int, std::string> run_tool(const std::string& args) {
  FILE* p = popen((tool + " " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  return {WEXITSTATUS(rc), out};
}

std::string gpt2_args() {
  return "--tokenizer-type GPT2BPETokenizer --vocab-file " + corpus + "/gpt2-vocab.json --merge-file " + corpus +
         "/gpt2-merges.txt";
}

std::string sample_jsonl(const std::string& dir) {
  // The first 40 chapters of the bundled corpus plus awkward documents.
  const std::string path = dir + "/in.jsonl";
  auto lines = t::run("gzip -dc " + corpus + "/kjv.jsonl.gz | head -40");
  std::ofstream out(path);
  out << lines;
  out << R"({"text": "", "book_chapter": "x"})" << "\n";
  out << R"({"text": ["First sentence.", "", " Second one\u00a0with\ttabs  ", "caf\u00e9 \ud83d\ude00"], "book_chapter": "y"})" << "\n";
  out << R"({"text": "  I'm here.\n\nAnd there's 1,234 more   ", "book_chapter": "z"})" << "\n";
  return path;
}

}  // namespace

TEST_CASE("preprocess_data writes what Megatron's encoder would, with 1 and 2 workers alike") {
  auto dir = t::scratch_dir("preprocess");
  const auto in = sample_jsonl(dir);
  auto [rc1, out1] = run_tool("--input " + in + " --output-prefix " + dir + "/w1 --json-keys text book_chapter " + gpt2_args() +
                              " --append-eod --workers 1 --log-interval 10");
  INFO(out1);
  REQUIRE(rc1 == 0);
  CHECK_THAT(out1, Catch::Contains("Processed 40 documents") && Catch::Contains("MB/s"));
  auto [rc2, out2] = run_tool("--input " + in + " --output-prefix " + dir + "/w2 --json-keys text book_chapter " + gpt2_args() +
                              " --append-eod --workers 2");
  REQUIRE(rc2 == 0);
  for (const char* key : {"text", "book_chapter"}) {
    const std::string p1 = dir + "/w1_" + key + "_document", p2 = dir + "/w2_" + key + "_document";
    CHECK(t::slurp(p1 + ".bin") == t::slurp(p2 + ".bin"));
    CHECK(t::slurp(p1 + ".idx") == t::slurp(p2 + ".idx"));
  }
  auto r = t::megatron_reference("preprocessed", {{"prefix", dir + "/w1_text_document"}, {"jsonl", in},
                                                  {"key", "text"}, {"append_eod", true}}, dir);
  CHECK(r["dtype"] == 8);  // uint16 for GPT-2's 50257 tokens
  REQUIRE(r["got_docs"].size() == 43);
  CHECK(r["got_docs"] == r["want_docs"]);
  CHECK(r["got_lens"] == r["want_lens"]);
  indexed_dataset ds(dir + "/w1_text_document");
  CHECK(ds.document_indices().size() == 44);
}

TEST_CASE("preprocess_data rejects bad flags and malformed lines with exit status 2") {
  auto dir = t::scratch_dir("preprocess_errors");
  {
    std::ofstream(dir + "/bad.jsonl") << R"({"text": "ok"})" << "\n" << R"({"text": "broken)" << "\n";
  }
  auto [rc, out] = run_tool("--input " + dir + "/bad.jsonl --output-prefix " + dir + "/o " + gpt2_args() + " --workers 1");
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("bad.jsonl:2") && Catch::Contains("malformed JSON"));
  std::tie(rc, out) = run_tool("--input " + dir + "/bad.jsonl " + gpt2_args());
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("preprocess_data: error: the following arguments are required: --output-prefix, --workers"));
  std::tie(rc, out) = run_tool("--input x --output-prefix y --workers 1 --split-sentences " + gpt2_args());
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("--split-sentences is not implemented"));
  std::tie(rc, out) = run_tool("--input x --output-prefix y --workers 1 --tokenizer-type GPT2BPETokenizer");
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("--vocab-file is required"));
  std::tie(rc, out) = run_tool("--input x --output-prefix y --workers 1 --bogus 3 " + gpt2_args());
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("error:") && Catch::Contains("bogus"));
  {
    std::ofstream(dir + "/nokey.jsonl") << R"({"body": "ok"})" << "\n";
  }
  std::tie(rc, out) = run_tool("--input " + dir + "/nokey.jsonl --output-prefix " + dir + "/o " + gpt2_args() + " --workers 2");
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("nokey.jsonl:1") && Catch::Contains("--json-keys"));
}

TEST_CASE("preprocess_data with NullTokenizer stores the given ids and picks uint16 or int32 by vocabulary") {
  auto dir = t::scratch_dir("preprocess_null");
  std::ofstream(dir + "/ids.jsonl") << R"({"text": "1 2 3"})" << "\n" << R"({"text": "70000 5"})" << "\n";
  auto [rc, out] = run_tool("--input " + dir + "/ids.jsonl --output-prefix " + dir + "/n --tokenizer-type NullTokenizer "
                            "--vocab-size 100000 --append-eod --workers 1");
  INFO(out);
  REQUIRE(rc == 0);
  indexed_dataset ds(dir + "/n_text_document");
  CHECK(ds.token_dtype() == dtype::int32);
  CHECK(ds.get(0) == std::vector<std::int64_t>{1, 2, 3, 100000});
  CHECK(ds.get(1) == std::vector<std::int64_t>{70000, 5, 100000});
}

TEST_CASE("preprocess_data tokenizes with the library tokenizer-metadata names, as Megatron's default path") {
  // byte-level for a SentencePiece type: the text's UTF-8 bytes and eod 0 (megatron-core's
  // ByteLevelTokenizer, compared id for id in dataset_tokenizer.test.cpp); the model file is never read.
  auto dir = t::scratch_dir("preprocess_metadata");
  std::ofstream(dir + "/in.jsonl") << R"({"text": "hé!"})" << "\n";
  std::ofstream(dir + "/bytes.json") << R"({"library": "byte-level"})";
  const std::string common = "--input " + dir + "/in.jsonl --tokenizer-type GPTSentencePieceTokenizer --tokenizer-model " +
                             dir + "/unused.model --append-eod --workers 1 --tokenizer-metadata ";
  auto [rc, out] = run_tool(common + dir + "/bytes.json --output-prefix " + dir + "/b");
  INFO(out);
  REQUIRE(rc == 0);
  indexed_dataset ds(dir + "/b_text_document");
  CHECK(ds.token_dtype() == dtype::uint16);
  CHECK(ds.get(0) == std::vector<std::int64_t>{104, 0xc3, 0xa9, 33, 0});
  auto [rc2, out2] = run_tool(common + dir + "/none.json --output-prefix " + dir + "/n");
  CHECK(rc2 == 2);
  CHECK(out2.find("--tokenizer-metadata " + dir + "/none.json: no such file") != std::string::npos);
}

TEST_CASE("preprocess_data with TikTokenizer stores Megatron's ids on the default and legacy paths") {
  auto dir = t::scratch_dir("preprocess_tiktoken");
  const std::vector<std::string> docs = {"Hello <a,b> world <s>", "caf\xc3\xa9  \n\n\xe6\x97\xa5\xe6\x9c\xac 123 ok</s>", ""};
  const nlohmann::json specials = {"<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>", "<a,b>"};
  nlohmann::json spec = {{"texts", docs}, {"random_texts", 0}, {"configs", nlohmann::json::array()}};
  for (bool legacy : {false, true})
    spec["configs"].push_back({{"legacy", legacy}, {"pattern", "v2"}, {"vocab_size", 51256},
                               {"num_special_tokens", 1000}, {"special_tokens", specials}});
  std::ofstream(dir + "/spec.json") << spec.dump();
  auto ref = nlohmann::json::parse(t::run(t::python() + " " + MACTOR_SOURCE_DIR + "/tests/data/tiktoken_reference.py " +
                                          dir + "/spec.json " + dir + " 2>/dev/null"));
  {
    std::ofstream in(dir + "/in.jsonl");
    for (const auto& d : docs) in << nlohmann::json({{"text", d}}).dump() << "\n";
  }
  for (int legacy = 0; legacy < 2; ++legacy) {
    const std::string prefix = dir + "/t" + std::to_string(legacy);
    auto [rc, out] = run_tool("--input " + dir + "/in.jsonl --output-prefix " + prefix + " --tokenizer-type TikTokenizer "
                              "--tokenizer-model " + ref["vocab"].get<std::string>() + " --vocab-size 51256 "
                              "--tiktoken-pattern v2 --tiktoken-special-tokens '<unk>' '<s>' '</s>' '<mask>' '<pad>' "
                              "'<cls>' '<sep>' '<a,b>' --append-eod --workers 2" + (legacy ? " --legacy-tokenizer" : ""));
    INFO(out);
    REQUIRE(rc == 0);
    indexed_dataset ds(prefix + "_text_document");
    CHECK(ds.token_dtype() == dtype::uint16);
    const auto& r = ref["configs"][legacy];
    std::size_t kept = 0;  // Megatron drops documents that encode to nothing
    for (std::size_t i = 0; i < docs.size(); ++i) {
      auto ids = r["ids"][i].get<std::vector<std::int64_t>>();
      if (ids.empty()) continue;
      ids.push_back(r["eod"].get<std::int64_t>());
      CHECK(ds.get(kept++) == ids);
    }
    CHECK(ds.size() == kept);
  }
}
