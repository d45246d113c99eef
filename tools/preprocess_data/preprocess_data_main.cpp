// preprocess_data: Megatron's tools/preprocess_data.py in C++ (jsonl -> <prefix>_<key>_document
// .bin/.idx). Same flags; argparse-style errors with exit status 2.
#include <cxxopts.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "data/data_error.hpp"
#include "tools/preprocess_data/preprocess.hpp"

namespace {

constexpr const char* usage =
    "usage: preprocess_data [-h] --input INPUT [--json-keys JSON_KEYS [JSON_KEYS ...]]\n"
    "                       [--split-sentences] [--keep-newlines] --tokenizer-type TOKENIZER_TYPE\n"
    "                       [--vocab-file VOCAB_FILE] [--merge-file MERGE_FILE]\n"
    "                       [--tokenizer-model TOKENIZER_MODEL] [--vocab-size VOCAB_SIZE]\n"
    "                       [--tiktoken-pattern TIKTOKEN_PATTERN]\n"
    "                       [--tiktoken-num-special-tokens TIKTOKEN_NUM_SPECIAL_TOKENS]\n"
    "                       [--tiktoken-special-tokens TIKTOKEN_SPECIAL_TOKENS [TIKTOKEN_SPECIAL_TOKENS ...]]\n"
    "                       [--tokenizer-metadata TOKENIZER_METADATA] [--legacy-tokenizer]\n"
    "                       [--append-eod] [--lang LANG] --output-prefix OUTPUT_PREFIX\n"
    "                       --workers WORKERS [--partitions PARTITIONS] [--log-interval LOG_INTERVAL]\n"
    "                       [--keep-sequential-samples]\n";

[[noreturn]] void fail(const std::string& msg) {
  std::cerr << usage << "preprocess_data: error: " << msg << "\n";
  std::exit(2);
}

// argparse's nargs='+' for --json-keys: gather the words after it into one comma-joined value.
// --tiktoken-special-tokens' words (which may hold commas) go to `special_tokens` instead.
std::vector<std::string> join_nargs(int argc, char** argv, std::optional<std::vector<std::string>>& special_tokens) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tiktoken-special-tokens") {
      special_tokens.emplace();
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) special_tokens->push_back(argv[++i]);
      if (special_tokens->empty()) fail("argument --tiktoken-special-tokens: expected at least one argument");
    } else if (a == "--json-keys") {
      std::string v;
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) v += (v.empty() ? "" : ",") + std::string(argv[++i]);
      if (v.empty()) fail("argument --json-keys: expected at least one argument");
      out.push_back("--json-keys=" + v);
    } else {
      out.push_back(a);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options opts("preprocess_data", "Tokenize a jsonl file into Megatron .bin/.idx datasets");
  opts.add_options()
    ("h,help", "show this help message and exit")
    ("input", "Path to input JSON", cxxopts::value<std::string>())
    ("json-keys", "space separate listed of keys to extract from json", cxxopts::value<std::vector<std::string>>())
    ("split-sentences", "Split documents into sentences.")
    ("keep-newlines", "Keep newlines between sentences when splitting.")
    ("tokenizer-type", "What type of tokenizer to use.", cxxopts::value<std::string>())
    ("vocab-file", "Path to the vocab file.", cxxopts::value<std::string>())
    ("merge-file", "Path to the BPE merge file.", cxxopts::value<std::string>())
    ("tokenizer-model", "Sentencepiece tokenizer model / HF tokenizer.", cxxopts::value<std::string>())
    ("vocab-size", "size of vocab for use with NullTokenizer", cxxopts::value<std::int64_t>())
    ("tiktoken-pattern", "Which tiktoken pattern to use. Options: [v1, v2]", cxxopts::value<std::string>())
    ("tiktoken-num-special-tokens", "Number of special tokens in tiktoken tokenizer",
     cxxopts::value<std::int64_t>()->default_value("1000"))
    ("legacy-tokenizer", "To use legacy tokenizer system.")
    ("tokenizer-metadata", "Path to tokenizer metadata in json format.", cxxopts::value<std::string>())
    ("append-eod", "Append an <eod> token to the end of a document.")
    ("lang", "Language to use for NLTK-powered sentence splitting.", cxxopts::value<std::string>()->default_value("english"))
    ("output-prefix", "Path to binary output file without suffix", cxxopts::value<std::string>())
    ("workers", "Number of worker threads to launch.", cxxopts::value<int>())
    ("partitions", "Number of file partitions", cxxopts::value<int>()->default_value("1"))
    ("log-interval", "Interval between progress updates", cxxopts::value<std::int64_t>()->default_value("1000"))
    ("keep-sequential-samples", "Ensure ordering of samples (always kept here).");
  std::optional<std::vector<std::string>> special_tokens;
  auto args = join_nargs(argc, argv, special_tokens);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  int cargc = static_cast<int>(cargs.size());
  cxxopts::ParseResult r;
  try {
    char** p = cargs.data();
    r = opts.parse(cargc, p);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  if (r.count("help")) {
    std::cout << usage << "\n" << opts.help() << "\n";
    return 0;
  }
  if (!r.unmatched().empty()) fail("unrecognized arguments: " + r.unmatched().front());
  std::vector<std::string> missing;
  for (const char* req : {"input", "tokenizer-type", "output-prefix", "workers"})
    if (!r.count(req)) missing.push_back(std::string("--") + req);
  if (!missing.empty()) {
    std::string m;
    for (auto& s : missing) m += (m.empty() ? "" : ", ") + s;
    fail("the following arguments are required: " + m);
  }
  if (r.count("split-sentences"))
    fail("--split-sentences is not implemented in mactor's preprocess_data; split sentences beforehand "
         "and pass each document's sentences as a JSON list of strings");
  if (r["partitions"].as<int>() != 1)
    fail("--partitions=" + std::to_string(r["partitions"].as<int>()) + " is not implemented; use 1 and raise --workers");
  if (r["workers"].as<int>() < 1) fail("argument --workers: must be >= 1");

  mactor::tools::preprocess_options o;
  o.input = r["input"].as<std::string>();
  o.output_prefix = r["output-prefix"].as<std::string>();
  if (r.count("json-keys")) o.json_keys = r["json-keys"].as<std::vector<std::string>>();
  o.tokenizer.tokenizer_type = r["tokenizer-type"].as<std::string>();
  if (r.count("vocab-file")) o.tokenizer.vocab_file = r["vocab-file"].as<std::string>();
  if (r.count("merge-file")) o.tokenizer.merge_file = r["merge-file"].as<std::string>();
  if (r.count("tokenizer-model")) o.tokenizer.tokenizer_model = r["tokenizer-model"].as<std::string>();
  if (r.count("vocab-size")) o.tokenizer.vocab_size = r["vocab-size"].as<std::int64_t>();
  if (r.count("tiktoken-pattern")) o.tokenizer.tiktoken_pattern = r["tiktoken-pattern"].as<std::string>();
  o.tokenizer.tiktoken_num_special_tokens = r["tiktoken-num-special-tokens"].as<std::int64_t>();
  o.tokenizer.tiktoken_special_tokens = special_tokens;
  o.tokenizer.legacy_tokenizer = r.count("legacy-tokenizer") > 0;
  if (r.count("tokenizer-metadata")) o.tokenizer.tokenizer_metadata = r["tokenizer-metadata"].as<std::string>();
  o.append_eod = r.count("append-eod") > 0;
  o.workers = r["workers"].as<int>();
  o.log_interval = r["log-interval"].as<std::int64_t>();
  std::cout << "Processing data with " << o.workers << " workers." << std::endl;
  try {
    auto res = mactor::tools::preprocess(o, [](const std::string& s) { std::cerr << s << std::endl; });
    std::fprintf(stderr, "Done: %lld documents, %lld tokens, %.3f MB in %.3f s (%.3f MB/s) with %d workers.\n",
                 static_cast<long long>(res.documents), static_cast<long long>(res.tokens), res.input_mb,
                 res.seconds, res.mb_per_s(), o.workers);
    for (auto& p : res.output_prefixes) std::cout << "Wrote " << p << ".bin and " << p << ".idx" << std::endl;
  } catch (const mactor::tools::input_error& e) {
    std::cerr << "preprocess_data: error: " << e.what() << "\n";
    return 2;
  } catch (const mactor::data::data_error& e) {
    std::cerr << "preprocess_data: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
