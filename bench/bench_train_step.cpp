// Benchmark: one training step (forward + backward + a plain SGD update) of the GPT model on the
// CPU, ours against PyTorch running the same model (bench_train_step_torch.py) with the same
// thread count. Each measurement runs in its own process so peak RSS is per runtime and case.
// Both runtimes use GNU OpenMP; both children get the same OMP_WAIT_POLICY (default passive:
// with more runnable threads than cores, as on a shared 2-core machine, spinning idle OpenMP
// threads steal the cores that do the work).
//   bench_train_step [--threads N] [--style gpt2|llama] [--cases 0,1] [--wait-policy P]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/random_batch.hpp"
#include "kernels/blas_kernels.hpp"
#include "kernels/gemm.hpp"
#include "kernels/threads.hpp"
#include "model/gpt_model.hpp"

namespace {

struct bench_case {
  int layers, hidden, heads, seq, vocab, batch, iters;
};
const bench_case cases[] = {{2, 128, 4, 128, 8192, 16, 10}, {4, 256, 4, 256, 50304, 8, 3}};

struct result {
  double ms = 0, tokens_per_s = 0, gemm_share = 0, rss_mb = 0, cpu_ms = 0;
  bool ok = false;
};

mactor::model::gpt_model_config make_config(const bench_case& b, bool llama) {
  mactor::model::gpt_model_config c;
  c.num_layers = b.layers, c.hidden_size = b.hidden, c.ffn_hidden_size = 4 * b.hidden;
  c.num_attention_heads = b.heads, c.num_query_groups = llama ? b.heads / 2 : b.heads;
  c.seq_length = b.seq, c.max_position_embeddings = b.seq, c.padded_vocab_size = b.vocab;
  c.attention_dropout = 0, c.hidden_dropout = 0;  // the PyTorch reference has no dropout
  if (llama) {
    c.normalization = mactor::model::normalization_kind::rms_norm;
    c.position_embedding_type = mactor::model::position_embedding_kind::rope;
    c.swiglu = true, c.add_bias_linear = false, c.untie_embeddings_and_output_weights = true;
  }
  return c;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Runs in the child process: trains `iters` steps and prints the RESULT line.
int run_ours(const bench_case& b, bool llama, int threads) {
  mactor::kernels::set_kernel_threads(threads);
  mactor::model::single_group tp;
  mactor::model::gpt_model m(make_config(b, llama), tp);
  const mactor::bench::random_batch batch(b.batch, b.seq, b.vocab);
  const auto mb = batch.view();
  const auto& tokens = batch.tokens;
  auto step = [&] {
    m.zero_grad();
    m.forward_backward(mb, 1.0f / float(tokens.size()));
    auto values = m.store().values<float>();
    auto grads = m.store().grads<float>();
    for (std::size_t i = 0; i < values.size(); ++i) values[i] -= 1e-3f * grads[i];
  };
  for (int i = 0; i < 2; ++i) step();
  mactor::kernels::gemm_stats_reset();
  const double cpu_start = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < b.iters; ++i) step();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / b.iters;
  const double cpu = (cpu_seconds() - cpu_start) / b.iters;
  const double gemm = mactor::kernels::gemm_stats_read().nanoseconds * 1e-9 / b.iters;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("RESULT ms_per_iter=%.3f tokens_per_s=%.1f gemm_share=%.3f peak_rss_mb=%.1f "
              "cpu_ms_per_iter=%.3f\n",
              seconds * 1e3, b.batch * b.seq / seconds, gemm / seconds, usage.ru_maxrss / 1024.0,
              cpu * 1e3);
  return 0;
}

result run_child(const std::string& command) {
  result r;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    std::string s(line);
    if (s.rfind("RESULT ", 0) != 0) continue;
    std::map<std::string, double> kv;
    std::istringstream in(s.substr(7));
    std::string item;
    while (in >> item) {
      const auto eq = item.find('=');
      kv[item.substr(0, eq)] = std::stod(item.substr(eq + 1));
    }
    r = {kv["ms_per_iter"], kv["tokens_per_s"], kv["gemm_share"], kv["peak_rss_mb"],
         kv["cpu_ms_per_iter"], true};
  }
  r.ok = pclose(pipe) == 0 && r.ok;
  return r;
}

std::string python() {
  const std::filesystem::path venv = std::filesystem::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return std::filesystem::exists(venv) ? venv.string() : "python3";
}

}  // namespace

int main(int argc, char** argv) {
  int threads = int(std::thread::hardware_concurrency()), child_case = -1;
  std::string style = "gpt2", case_list = "0,1", wait_policy = "passive";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--threads") threads = std::stoi(value);
    else if (flag == "--style") style = value;
    else if (flag == "--cases") case_list = value;
    else if (flag == "--wait-policy") wait_policy = value;
    else if (flag == "--child-case") child_case = std::stoi(value);
    else {
      std::fprintf(stderr, "error: unknown option %s; use --threads N --style gpt2|llama "
                           "--cases 0,1 --wait-policy passive|active\n", flag.c_str());
      return 2;
    }
  }
  if (style != "gpt2" && style != "llama") {
    std::fprintf(stderr, "error: --style=%s; use gpt2 or llama\n", style.c_str());
    return 2;
  }
  if (wait_policy != "passive" && wait_policy != "active") {
    std::fprintf(stderr, "error: --wait-policy=%s; use passive or active\n", wait_policy.c_str());
    return 2;
  }
  if (child_case >= 0) return run_ours(cases[child_case], style == "llama", threads);

  // Our child runs the OpenBLAS kernels pretrain_gpt would (kernels/blas_kernels.hpp).
  const auto core = mactor::kernels::better_blas_coretype();
  std::printf("train step (forward + backward + SGD), %s-style, %d threads, float32, no dropout, "
              "OMP_WAIT_POLICY=%s, OpenBLAS core %s\n", style.c_str(), threads, wait_policy.c_str(),
              core ? core->c_str() : mactor::kernels::blas_core_name().c_str());
  const std::string env = "OMP_WAIT_POLICY=" + wait_policy + " ";
  const std::string blas_env = core ? "OPENBLAS_CORETYPE=" + *core + " " : "";
  std::printf("%-28s %-8s %10s %10s %12s %7s %9s\n", "case", "runtime", "ms/iter",
              "cpu-ms/it", "tokens/s", "gemm%", "peakRSS");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::stringstream list(case_list);
  std::string item;
  while (std::getline(list, item, ',')) {
    const int index = std::stoi(item);
    const auto& b = cases[index];
    char name[128];
    std::snprintf(name, sizeof name, "L%d h%d a%d s%d v%d b%d", b.layers, b.hidden, b.heads,
                  b.seq, b.vocab, b.batch);
    const auto ours = run_child(env + blas_env + self + " --child-case " + item + " --threads " +
                                std::to_string(threads) + " --style " + style);
    std::ostringstream torch_cmd;
    torch_cmd << env << python() << " " << MACTOR_SOURCE_DIR << "/bench/bench_train_step_torch.py"
              << " --layers " << b.layers << " --hidden " << b.hidden << " --heads " << b.heads
              << " --seq " << b.seq << " --vocab " << b.vocab << " --batch " << b.batch
              << " --iters " << b.iters << " --threads " << threads << " --style " << style;
    const auto torch = run_child(torch_cmd.str());
    for (const auto& [label, r] : {std::pair{"mactor", ours}, std::pair{"pytorch", torch}}) {
      if (!r.ok) {
        std::printf("%-28s %-8s failed\n", name, label);
        continue;
      }
      std::printf("%-28s %-8s %10.1f %10.1f %12.0f %6.0f%% %6.0f MB\n", name, label, r.ms,
                  r.cpu_ms, r.tokens_per_s, 100 * r.gemm_share, r.rss_mb);
    }
    if (ours.ok && torch.ok)
      std::printf("%-28s PyTorch time / ours: %.2fx wall, %.2fx cpu\n", name, torch.ms / ours.ms,
                  torch.cpu_ms / ours.cpu_ms);
  }
  return 0;
}
