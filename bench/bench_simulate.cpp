// Benchmark: `mactor simulate`'s accuracy against published results, as markdown tables.
//
// 1. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
//    Megatron-LM" (SC'21), Table 1: GPT models of 1.7B to 1T parameters on 32 to 3072 A100s. The
//    paper counts FLOPs with its Eq. 3, 96 B s l h^2 (1 + s/6h + V/16lh), which includes the
//    recomputed forward (every run used full activation recomputation), so predicted TFLOP/s use
//    that count. Each row's micro-batch, virtual pipeline stages and data-parallel implementation
//    are those of the script Megatron-LM published to reproduce the table
//    (examples/sc21/run_table_1.sh): --DDP-impl torch (bucketed all-reduce overlapped with the
//    backward, here --overlap-grad-reduce) for the rows without pipeline parallelism, local (the
//    all-reduce after the backward) for the others. Common to every row (the scripts' CONFIG.sh):
//    sequence 2048, vocabulary 51200, fp16, full uniform recompute of every layer; no sequence
//    parallelism or distributed optimizer (neither existed then).
// 2. Megatron-Core's H100 table (core_v0.15.0 README, images/model_table.png): GPT models of 1.7B
//    to 462B on 48 to 6144 H100s, per-GPU TFLOP/s by Megatron's own formula (--log-throughput's).
//    The README gives sequence 4096, vocabulary 131072 and the overlaps (--overlap-grad-reduce,
//    --overlap-param-gather, --tp-comm-overlap where TP > 1); assumed for every row: bf16, micro-batch 1,
//    sequence parallelism and --tp-comm-overlap with TP, the distributed optimizer, no recompute,
//    1F1B. `--micro-batch-size N` sets its micro-batch (default 1).
// Each row runs through the same config parser and simulator as `mactor simulate`; nothing is
// fitted per row.
//   bench_simulate [--micro-batch-size N]
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
  int micro_batch = 0;            // 0: the table's common setting
  int layers_per_virtual_stage = 0;  // 0: no virtual stages
  bool overlap_grad_reduce = false;
};

// name, heads, hidden, layers, TP, PP, GPUs, batch, TFLOP/s; micro-batch, layers per virtual
// stage and --DDP-impl torch from examples/sc21/run_table_1.sh.
const std::vector<table_row> narayanan_rows = {
    {"1.7B", 24, 2304, 24, 1, 1, 32, 512, 137, 16, 0, true},
    {"3.6B", 32, 3072, 30, 2, 1, 64, 512, 138, 16, 0, true},
    {"7.5B", 32, 4096, 36, 4, 1, 128, 512, 142, 16, 0, true},
    {"18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 0, true},
    {"39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 0, false},
    {"76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 5, false},
    {"145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 5, false},
    {"310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 3, false},
    {"529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 1, false},
    {"1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 0, false},
};

const std::vector<table_row> megatron_core_h100_rows = {
    {"1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8},    {"7.1B", 32, 4096, 30, 2, 1, 96, 192, 465.9},
    {"16B", 48, 6144, 32, 4, 1, 192, 192, 489.1},    {"32B", 56, 7168, 48, 8, 1, 384, 192, 459.6},
    {"70B", 64, 8192, 84, 8, 2, 768, 384, 419.7},    {"119B", 80, 10240, 92, 8, 4, 1536, 768, 420.5},
    {"177B", 96, 12288, 96, 8, 6, 2304, 1152, 432.8}, {"314B", 128, 16384, 96, 8, 8, 3072, 1536, 474.4},
    {"462B", 144, 18432, 112, 8, 16, 6144, 3072, 459.9},
};

struct published_table {
  const char* title;
  const char* system_file;
  const std::vector<table_row>* rows;
  std::vector<std::string> settings;  // flags every row shares
  bool paper_flops;                   // count FLOPs with Narayanan et al.'s Eq. 3
  int seq, vocab;
  const char* calibration_row;        // the row the system file's compute_efficiency was set on
};

std::vector<std::string> flags_of(const published_table& t, const table_row& r, int micro_batch) {
  auto n = [](auto v) { return std::to_string(v); };
  std::vector<std::string> flags = {
      "--num-layers", n(r.layers), "--hidden-size", n(r.hidden), "--num-attention-heads", n(r.heads),
      "--seq-length", n(t.seq), "--max-position-embeddings", n(t.seq), "--vocab-size", n(t.vocab),
      "--micro-batch-size", n(r.micro_batch ? r.micro_batch : micro_batch), "--global-batch-size", n(r.batch),
      "--tensor-model-parallel-size", n(r.tp), "--pipeline-model-parallel-size", n(r.pp),
      "--train-iters", "1", "--lr", "1e-4"};
  flags.insert(flags.end(), t.settings.begin(), t.settings.end());
  if (r.layers_per_virtual_stage)
    flags.insert(flags.end(), {"--num-layers-per-virtual-pipeline-stage", n(r.layers_per_virtual_stage)});
  if (r.overlap_grad_reduce) flags.push_back("--overlap-grad-reduce");
  if (r.tp > 1 && !t.paper_flops) flags.insert(flags.end(), {"--sequence-parallel", "--tp-comm-overlap"});
  return flags;
}

// Narayanan et al.'s Eq. 3: model FLOPs per iteration counting the recomputed forward.
double paper_flops(const table_row& r, double seq, double vocab) {
  const double h = r.hidden, l = r.layers;
  return 96 * r.batch * seq * l * h * h * (1 + seq / (6 * h) + vocab / (16 * l * h));
}

void print_table(const published_table& t, int micro_batch) {
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/" + t.system_file);
  std::printf("\n%s\nsystem: %s\n", t.title, system.name.c_str());
  std::printf("| model | TP | PP | DP | GPUs | batch | published TFLOP/s/GPU | predicted | error | bubble | MFU |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  double total_abs_error = 0, calibration_abs_error = 0;
  for (const auto& row : *t.rows) {
    const auto flags = flags_of(t, row, micro_batch);
    const auto r = mactor::config::resolve(flags, "bench_simulate", {0, row.gpus}, [](std::string_view) { return false; });
    if (r.exit_status) {
      std::printf("| %s | refused: %s |\n", row.name, r.err.c_str());
      continue;
    }
    const auto s = sim::simulate_config(r.args, system, false);
    const double predicted = t.paper_flops ? paper_flops(row, t.seq, t.vocab) / (s.iteration.iteration_s * 1e12 * row.gpus)
                                           : s.model_tflops_per_gpu;
    const double error = predicted / row.published_tflops - 1;
    total_abs_error += std::fabs(error);
    if (std::strcmp(row.name, t.calibration_row) == 0) calibration_abs_error = std::fabs(error);
    double bubble = 0;
    for (const auto& rank : s.iteration.ranks) bubble = std::max(bubble, rank.bubble_fraction);
    std::printf("| %s | %d | %d | %lld | %d | %d | %.1f | %.1f | %+.1f%% | %.3f | %.1f%% |\n", row.name, row.tp, row.pp,
                static_cast<long long>(r.args.derived.data_parallel_size), row.gpus, row.batch, row.published_tflops,
                predicted, 100 * error, bubble, 100 * s.mfu);
  }
  const double rows = static_cast<double>(t.rows->size());
  std::printf("mean absolute error: %.1f%%; %.1f%% over the %d rows other than %s, the row the system file's "
              "compute_efficiency is calibrated on\n",
              100 * total_abs_error / rows, 100 * (total_abs_error - calibration_abs_error) / (rows - 1),
              static_cast<int>(rows) - 1, t.calibration_row);
}

}  // namespace

int main(int argc, char** argv) {
  int micro_batch = 1;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--micro-batch-size") == 0) micro_batch = std::atoi(argv[i + 1]);
  const std::vector<std::string> recompute = {"--fp16", "--recompute-granularity", "full", "--recompute-method", "uniform",
                                              "--recompute-num-layers", "1", "--attention-backend", "unfused"};
  const std::vector<std::string> overlapped = {"--bf16", "--use-distributed-optimizer", "--overlap-grad-reduce",
                                               "--overlap-param-gather"};
  print_table({"Narayanan et al. SC'21, Table 1 (TFLOP/s/GPU by the paper's Eq. 3, recompute counted)",
               "a100_80gb_dgx.json", &narayanan_rows, recompute, true, 2048, 51200, "1.7B"},
              micro_batch);
  print_table({"Megatron-Core's H100 table (README of core_v0.15.0; TFLOP/s/GPU by Megatron's formula)",
               "h100_sxm_dgx.json", &megatron_core_h100_rows, overlapped, false, 4096, 131072, "1.7B"},
              micro_batch);
  return 0;
}
