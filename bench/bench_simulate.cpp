// Benchmark: `mactor simulate`'s accuracy against published results. Narayanan et al., "Efficient
// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC'21), Table 1: GPT
// models of 1.7B to 1T parameters on 32 to 3072 A100s with their tensor/pipeline/data-parallel
// sizes and batch sizes, and the TFLOP/s per GPU they achieved. Each row runs through the same
// config parser and simulator as `mactor simulate` with the A100 system file; nothing is fitted
// per row. The paper counts FLOPs with its Eq. 3, 96 B s l h^2 (1 + s/6h + V/16lh), which
// includes the recomputed forward (every run used full activation recomputation), so predicted
// TFLOP/s here use that count over the simulated iteration time.
// Settings the table does not give, the same for every row: sequence length 2048, vocabulary
// 51200, micro-batch size 1, fp16, the 1F1B schedule, full uniform recompute of every layer, no
// sequence parallelism, no distributed optimizer, the gradient all-reduce after the backward.
//   bench_simulate [--system FILE] [--micro-batch-size N]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/simulation.hpp"

namespace {

namespace sim = mactor::simulate;

struct table_row {
  const char* name;
  int heads, hidden, layers, tp, pp, gpus, batch;
  double published_tflops;
};

// Narayanan et al. SC'21, Table 1.
const table_row rows[] = {
    {"1.7B", 24, 2304, 24, 1, 1, 32, 512, 137},      {"3.6B", 32, 3072, 30, 2, 1, 64, 512, 138},
    {"7.5B", 32, 4096, 36, 4, 1, 128, 512, 142},     {"18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135},
    {"39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138},   {"76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140},
    {"145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148}, {"310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155},
    {"529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163}, {"1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163},
};

constexpr double seq = 2048, vocab = 51200;

std::vector<std::string> flags_of(const table_row& r, int micro_batch) {
  auto n = [](auto v) { return std::to_string(v); };
  return {"--num-layers", n(r.layers), "--hidden-size", n(r.hidden), "--num-attention-heads", n(r.heads),
          "--seq-length", "2048", "--max-position-embeddings", "2048", "--vocab-size", "51200",
          "--micro-batch-size", n(micro_batch), "--global-batch-size", n(r.batch), "--fp16",
          "--tensor-model-parallel-size", n(r.tp), "--pipeline-model-parallel-size", n(r.pp),
          "--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1",
          "--train-iters", "1", "--lr", "1e-4"};
}

// The paper's Eq. 3: model FLOPs per iteration counting the recomputed forward.
double paper_flops(const table_row& r) {
  const double h = r.hidden, l = r.layers;
  return 96 * r.batch * seq * l * h * h * (1 + seq / (6 * h) + vocab / (16 * l * h));
}

}  // namespace

int main(int argc, char** argv) {
  std::string system_file = std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/a100_80gb_dgx.json";
  int micro_batch = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--system") == 0) system_file = argv[i + 1];
    else if (std::strcmp(argv[i], "--micro-batch-size") == 0) micro_batch = std::atoi(argv[i + 1]);
  }
  const auto system = sim::read_system_file(system_file);
  std::printf("system: %s\n", system.name.c_str());
  std::printf("| model | TP | PP | DP | GPUs | batch | published TFLOP/s/GPU | predicted | error | bubble | MFU (Megatron's count) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  double total_abs_error = 0;
  for (const auto& row : rows) {
    const auto flags = flags_of(row, micro_batch);
    const auto r = mactor::config::resolve(flags, "bench_simulate", {0, row.gpus}, [](std::string_view) { return false; });
    if (r.exit_status) {
      std::printf("| %s | refused: %s |\n", row.name, r.err.c_str());
      continue;
    }
    const auto s = sim::simulate_config(r.args, system, false);
    const double predicted = paper_flops(row) / (s.iteration.iteration_s * 1e12 * row.gpus);
    const double error = predicted / row.published_tflops - 1;
    total_abs_error += std::fabs(error);
    double bubble = 0;
    for (const auto& rank : s.iteration.ranks) bubble = std::max(bubble, rank.bubble_fraction);
    std::printf("| %s | %d | %d | %lld | %d | %d | %.0f | %.1f | %+.1f%% | %.3f | %.1f%% |\n", row.name, row.tp, row.pp,
                static_cast<long long>(r.args.derived.data_parallel_size), row.gpus, row.batch, row.published_tflops,
                predicted, 100 * error, bubble, 100 * s.mfu);
  }
  std::printf("mean absolute error: %.1f%%\n", 100 * total_abs_error / std::size(rows));
  return 0;
}
