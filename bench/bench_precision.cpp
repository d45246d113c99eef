// Benchmark: mixed precision and activation recomputation on the CPU. One training step (forward
// + backward + an SGD update of fp32 main parameters, rounded into the model) of a GPT in fp32, in
// bf16, in bf16 with full (uniform, one layer per group) and selective (core_attn)
// recomputation, and in bf16 with tensorwise fp8 GEMMs, its weights bf16 or held as fp8
// (--fp8-param-gather), each in its own process, printing step time and memory by kind from the
// memory ledger (the bytes each tensor holds, so activation memory is measured directly rather
// than inferred from RSS), and peak RSS.
//   bench_precision [--case small|124m] [--iters N] [--threads N]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/random_batch.hpp"
#include "kernels/convert.hpp"
#include "kernels/threads.hpp"
#include "model/gpt_model.hpp"
#include "training/fp8_params.hpp"
#include "training/main_params.hpp"
#include "tensor/memory_ledger.hpp"

namespace {

using mactor::tensor::dtype;
using mactor::tensor::memory_kind;

struct bench_case {
  const char* name;
  int layers, hidden, heads, seq, vocab, batch;
};
// "124m": GPT-2 small's shape (124M parameters with its 50304-entry vocabulary).
const bench_case cases[] = {{"small", 2, 128, 4, 128, 8192, 8}, {"124m", 12, 768, 12, 512, 50304, 1}};

// A row of the table: a dtype, what is recomputed, and fp8 (0 none, 1 fp8 GEMMs, 2 fp8 GEMMs
// with the weights held as fp8).
struct variant {
  const char* name;
  dtype type;
  mactor::model::recompute_granularity granularity;
  int fp8 = 0;
};
const variant variants[] = {{"fp32", dtype::float32, mactor::model::recompute_granularity::none},
                            {"bf16", dtype::bfloat16, mactor::model::recompute_granularity::none},
                            {"bf16+full", dtype::bfloat16, mactor::model::recompute_granularity::full},
                            {"bf16+sel", dtype::bfloat16, mactor::model::recompute_granularity::selective},
                            {"bf16+fp8", dtype::bfloat16, mactor::model::recompute_granularity::none, 1},
                            {"bf16+fp8p", dtype::bfloat16, mactor::model::recompute_granularity::none, 2}};

mactor::model::gpt_model_config make_config(const bench_case& b, const variant& v) {
  const dtype type = v.type;
  mactor::model::gpt_model_config c;
  c.num_layers = b.layers, c.hidden_size = b.hidden, c.ffn_hidden_size = 4 * b.hidden;
  c.num_attention_heads = b.heads, c.seq_length = b.seq, c.max_position_embeddings = b.seq;
  c.padded_vocab_size = b.vocab;
  c.attention_dropout = 0, c.hidden_dropout = 0;
  c.params_dtype = type;
  c.recompute.granularity = v.granularity;  // full: uniform, one layer per group
  c.recompute.core_attn = true;             // selective: Megatron's default module
  c.fp8.enabled = v.fp8 > 0, c.fp8.recipe = mactor::model::fp8_recipe::tensorwise;
  return c;
}

double mib(std::int64_t bytes) { return double(bytes) / (1 << 20); }

// In the child: trains `iters` steps and prints one RESULT line.
int run_child(const bench_case& b, const variant& v, int iters, int threads) {
  mactor::kernels::set_kernel_threads(threads);
  auto& ledger = mactor::tensor::memory_ledger::host();
  mactor::model::single_group tp;
  std::vector<mactor::model::gpt_chunk> chunks;
  chunks.emplace_back(make_config(b, v), tp, mactor::model::chunk_layout{0, b.layers, true, true});
  auto& chunk = chunks.front();
  // fp32 main parameters: the model's own for fp32, a widened copy for bf16 (counted as
  // optimizer state, as Megatron's mixed-precision optimizer holds them).
  mactor::training::main_params main(chunks);
  std::unique_ptr<mactor::training::fp8_params> fp8;
  if (v.fp8 == 2) fp8 = std::make_unique<mactor::training::fp8_params>(chunks, main);
  const mactor::bench::random_batch batch(b.batch, b.seq, b.vocab);
  const auto mb = batch.view();
  const auto& tokens = batch.tokens;
  double loss = 0;
  std::uint64_t dropout_step = 0;
  auto step = [&] {
    chunk.zero_grad();
    loss = chunk.forward(0, mb, {}, {}, true, true, 1.0 / double(tokens.size()), dropout_step++).loss_sum /
           double(tokens.size());
    chunk.backward(0, {}, {});
    const float* g = chunk.store().grads<float>().data();
    for (const auto& part : main.held(0, 0, chunk.store().flat_numel()))
      for (std::size_t i = part.begin; i < part.end; ++i) part.values[i - part.begin] -= 1e-3f * g[i];
    main.copy_all_to_model();
    if (fp8) fp8->cast_all();  // TE's cast_master_weights_to_fp8
  };
  step();  // buffers allocated; the second step is like every later one
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) step();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / iters;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("RESULT ms=%.1f loss=%.5f params=%.2f grads=%.2f main_optim=%.2f act_peak=%.2f rss=%.1f\n", ms, loss,
              mib(ledger.usage(memory_kind::parameters).current), mib(ledger.usage(memory_kind::gradients).current),
              mib(ledger.usage(memory_kind::optimizer_state).current),
              mib(ledger.usage(memory_kind::activations).peak), usage.ru_maxrss / 1024.0);
  return 0;
}

std::map<std::string, double> run(const std::string& command) {
  std::map<std::string, double> kv;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return kv;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    std::string s(line);
    if (s.rfind("RESULT ", 0) != 0) continue;
    std::istringstream in(s.substr(7));
    std::string item;
    while (in >> item) {
      const auto eq = item.find('=');
      kv[item.substr(0, eq)] = std::stod(item.substr(eq + 1));
    }
  }
  if (pclose(pipe) != 0) kv.clear();
  return kv;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "small", child_variant;
  int iters = 3, threads = int(std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--case") which = value;
    else if (flag == "--iters") iters = std::stoi(value);
    else if (flag == "--threads") threads = std::stoi(value);
    else if (flag == "--child-variant") child_variant = value;
    else {
      std::fprintf(stderr, "error: unknown option %s; use --case small|124m --iters N --threads N\n", flag.c_str());
      return 2;
    }
  }
  const bench_case* b = nullptr;
  for (const auto& c : cases)
    if (which == c.name) b = &c;
  if (!b || iters < 1) {
    std::fprintf(stderr, "error: --case %s --iters %d; use --case small or 124m and --iters 1 or more\n", which.c_str(), iters);
    return 2;
  }
  for (const auto& v : variants)
    if (child_variant == v.name) return run_child(*b, v, iters, threads);

  std::printf("mixed precision, one step (forward + backward + SGD on fp32 main parameters), case %s: L%d h%d a%d "
              "s%d v%d b%d, %d threads, %d timed steps; memory in MiB from the ledger\n",
              b->name, b->layers, b->hidden, b->heads, b->seq, b->vocab, b->batch, threads, iters);
  std::printf("%-10s %10s %10s %9s %8s %10s %9s %9s %9s %9s %10s\n", "variant", "ms/iter", "loss", "params",
              "grads", "main+opt", "act-peak", "peakRSS", "act/fp32", "act/bf16", "time/fp32");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::map<std::string, std::map<std::string, double>> rows;
  for (const auto& v : variants) {
    const auto r = run("OMP_WAIT_POLICY=passive " + self + " --case " + which + " --iters " + std::to_string(iters) +
                       " --threads " + std::to_string(threads) + " --child-variant " + v.name);
    if (r.empty()) {
      std::printf("%-10s failed\n", v.name);
      continue;
    }
    rows[v.name] = r;
    auto ratio = [&](const char* base, const char* key) {
      return rows.count(base) ? r.at(key) / rows.at(base).at(key) : 0.0;
    };
    std::printf("%-10s %10.1f %10.5f %9.1f %8.1f %10.1f %9.1f %9.1f %9.2f %9.2f %10.2f\n", v.name, r.at("ms"),
                r.at("loss"), r.at("params"), r.at("grads"), r.at("main_optim"), r.at("act_peak"), r.at("rss"),
                ratio("fp32", "act_peak"), ratio("bf16", "act_peak"), ratio("fp32", "ms"));
  }
  std::printf("act-peak: the most bytes held at once by activation tensors (saved for backward, scratch); main+opt: "
              "fp32 main parameters beside a bf16 model (no optimizer moments in this benchmark's SGD); +full: "
              "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1; +sel: "
              "--recompute-granularity selective (core_attn); +fp8: --fp8-format hybrid --fp8-recipe tensorwise; "
              "+fp8p: the same with --fp8-param-gather's fp8 weights (the linears' weights one byte each). Recomputed "
              "losses equal bf16's bit for bit; +fp8p's equal +fp8's (the tensorwise cast is the forward's own).\n");
  return 0;
}
