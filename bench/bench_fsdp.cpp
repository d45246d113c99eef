// bench_fsdp: step time and memory of one GPT job under each data-parallel sharding: plain DDP,
// the distributed optimizer (ZeRO-1), and Megatron FSDP's optim_grads (ZeRO-2) and
// optim_grads_params (ZeRO-3; with --fsdp-double-buffer; initialized on the meta device). Each runs under `mactor -np
// N`; the table holds the median "elapsed time per iteration" after the first iteration, and
// rank 0's memory line (Megatron's report_memory: allocated after the first logged iteration, and
// its peak) and resident set.
// Usage: mactor's build dir: build/bin/bench_fsdp [--ranks N] [--iters I] [--hidden H] [--layers L]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct options {
  int ranks = 4, iters = 6, hidden = 256, layers = 4;
};

struct measured {
  double step_ms = 0, allocated_mb = 0, max_allocated_mb = 0, max_reserved_mb = 0;
};

measured run(const std::string& command, const fs::path& log) {
  if (const int status = std::system((command + " > " + log.string() + " 2>&1").c_str()); status != 0) {
    std::fprintf(stderr, "bench_fsdp: failed (status %d): %s\n(see %s)\n", status, command.c_str(), log.c_str());
    std::exit(1);
  }
  std::ifstream in(log);
  const std::regex step(R"(elapsed time per iteration \(ms\): ([0-9.]+))");
  const std::regex memory(
      R"(\[Rank 0\] \(after \d+ iterations\) memory \(MB\) \| allocated: ([0-9.e+-]+) \| max allocated: ([0-9.e+-]+) \| reserved: [0-9.e+-]+ \| max reserved: ([0-9.e+-]+))");
  std::vector<double> steps;
  measured m;
  std::smatch match;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, match, step)) steps.push_back(std::stod(match[1].str()));
    if (std::regex_search(line, match, memory))
      m.allocated_mb = std::stod(match[1].str()), m.max_allocated_mb = std::stod(match[2].str()),
      m.max_reserved_mb = std::stod(match[3].str());
  }
  if (steps.size() > 1) steps.erase(steps.begin());  // the first step warms up
  std::sort(steps.begin(), steps.end());
  m.step_ms = steps.empty() ? 0.0 : steps[steps.size() / 2];
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--ranks") o.ranks = std::stoi(v);
    else if (k == "--iters") o.iters = std::stoi(v);
    else if (k == "--hidden") o.hidden = std::stoi(v);
    else if (k == "--layers") o.layers = std::stoi(v);
    else {
      std::fprintf(stderr, "bench_fsdp: unknown option %s (--ranks --iters --hidden --layers)\n", k.c_str());
      return 2;
    }
  }
  const fs::path bin = fs::canonical("/proc/self/exe").parent_path();
  const std::string job =
      (bin / "mactor").string() + " -np " + std::to_string(o.ranks) + " --oversubscribe " + (bin / "pretrain_gpt").string() +
      " --mock-data --tokenizer-type NullTokenizer --vocab-size 32767 --num-layers " + std::to_string(o.layers) +
      " --hidden-size " + std::to_string(o.hidden) + " --num-attention-heads 4 --seq-length 128 "
      "--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size " + std::to_string(2 * o.ranks) +
      " --train-iters " + std::to_string(o.iters) + " --lr 1e-4 --log-interval 1 --eval-iters 0";
  const std::vector<std::pair<const char*, std::string>> layouts = {
      {"DDP (no sharding)", ""},
      {"distributed optimizer (ZeRO-1)", "--use-distributed-optimizer"},
      {"FSDP optim_grads (ZeRO-2)", "--use-megatron-fsdp --ckpt-format fsdp_dtensor --data-parallel-sharding-strategy optim_grads"},
      {"FSDP optim_grads_params (ZeRO-3)",
       "--use-megatron-fsdp --ckpt-format fsdp_dtensor --data-parallel-sharding-strategy optim_grads_params"},
      {"ZeRO-3 --fsdp-double-buffer", "--use-megatron-fsdp --ckpt-format fsdp_dtensor --data-parallel-sharding-strategy "
                                      "optim_grads_params --fsdp-double-buffer"},
      {"ZeRO-3 `--init-model-with-meta-device`", "--use-megatron-fsdp --ckpt-format fsdp_dtensor --data-parallel-sharding-strategy "
                                                "optim_grads_params --init-model-with-meta-device"},
  };
  std::printf("%d ranks, %d layers, hidden %d, vocabulary 32768, seq 128, micro-batch 1, 2 micro-batches per rank\n\n",
              o.ranks, o.layers, o.hidden);
  std::printf("%-34s %12s %16s %20s %18s\n", "layout", "step (ms)", "allocated (MB)", "max allocated (MB)",
              "max reserved (MB)");
  const fs::path log = fs::temp_directory_path() / "bench_fsdp.log";
  for (const auto& [name, flags] : layouts) {
    const auto m = run(job + " " + flags, log);
    std::printf("%-34s %12.1f %16.2f %20.2f %18.1f\n", name, m.step_ms, m.allocated_mb, m.max_allocated_mb, m.max_reserved_mb);
  }
  fs::remove(log);
  return 0;
}
