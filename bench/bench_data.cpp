// bench_data: preprocess_data throughput (MB/s of jsonl, 1 and 2 worker threads) on the bundled
// corpus, and GPTDataset index-building time for a synthetic 1M-document dataset.
// Usage: bench_data [--jsonl FILE] [--docs N] [--seq-length L] [--samples S]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>

#include "data/gpt_dataset.hpp"
#include "tools/preprocess_data/preprocess.hpp"

namespace {

std::string arg(int argc, char** argv, const std::string& name, const std::string& dflt) {
  for (int i = 1; i + 1 < argc; ++i)
    if (name == argv[i]) return argv[i + 1];
  return dflt;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const std::string src = MACTOR_SOURCE_DIR;
  const fs::path tmp = fs::temp_directory_path() / ("bench_data_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::string jsonl = arg(argc, argv, "--jsonl", "");
  if (jsonl.empty()) {
    jsonl = (tmp / "kjv.jsonl").string();
    if (std::system(("gzip -dc " + src + "/data/corpus/kjv.jsonl.gz > " + jsonl).c_str()) != 0) {
      std::fprintf(stderr, "bench_data: cannot decompress the bundled corpus\n");
      return 1;
    }
  }
  std::printf("%-44s %12s %12s %12s\n", "preprocess_data (GPT2BPETokenizer, --append-eod)", "MB", "seconds", "MB/s");
  for (int workers : {1, 2}) {
    mactor::tools::preprocess_options o;
    o.input = jsonl;
    o.output_prefix = (tmp / ("out" + std::to_string(workers))).string();
    o.tokenizer.tokenizer_type = "GPT2BPETokenizer";
    o.tokenizer.vocab_file = src + "/data/corpus/gpt2-vocab.json";
    o.tokenizer.merge_file = src + "/data/corpus/gpt2-merges.txt";
    o.append_eod = true;
    o.workers = workers;
    o.log_interval = 0;
    auto r = mactor::tools::preprocess(o, [](const std::string&) {});
    std::printf("%-44s %12.3f %12.3f %12.3f\n", ("  workers=" + std::to_string(workers)).c_str(), r.input_mb,
                r.seconds, r.mb_per_s());
  }

  const long docs = std::stol(arg(argc, argv, "--docs", "1000000"));
  const long L = std::stol(arg(argc, argv, "--seq-length", "2048"));
  std::mt19937 g(1234);
  std::vector<std::int32_t> sizes(static_cast<std::size_t>(docs));
  long long tokens = 0;
  for (auto& s : sizes) tokens += (s = 1 + static_cast<std::int32_t>(g() % 2048));
  const long samples = std::stol(arg(argc, argv, "--samples", std::to_string(3 * tokens / L)));  // ~3 epochs
  mactor::data::gpt_index_request r;
  r.begin = 0;
  r.end = docs;
  r.num_samples = samples;
  r.sequence_length = L;
  const auto t0 = std::chrono::steady_clock::now();
  auto idx = mactor::data::build_gpt_indices(sizes, r);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n%-44s %12s %12s %12s\n", "GPT index build (document/sample/shuffle)", "documents", "samples", "seconds");
  std::printf("%-44s %12ld %12zu %12.3f\n",
              ("  seq " + std::to_string(L) + ", " + std::to_string(idx.num_epochs) + " epochs" +
               (idx.separate_final_epoch ? " (separate last)" : ""))
                  .c_str(),
              docs, idx.num_samples(), s);
  fs::remove_all(tmp);
  return 0;
}
