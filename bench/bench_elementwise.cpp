// Benchmark: the rate of the element-wise kernels around a layer's matmuls on the CPU, in the
// bytes `mactor simulate` prices them by (simulate/elementwise_traffic.hpp): a layer norm reads
// and writes the hidden state; a bias-dropout-add reads the branch's output and the residual and
// writes their sum, with a byte of dropout mask per element. One thread, the forward kernels of
// one layer (a norm and a bias-dropout-add, twice) on [tokens, hidden] fp32 activations, the best
// of --repeats rounds. scripts/calibrate_cpu_system.py turns the rate into the CPU system file's
// memory_efficiency (rate / memory_bandwidth_GBps).
//   bench_elementwise [--tokens 256] [--hidden 256] [--dropout 0.1] [--repeats 20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/dropout.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/threads.hpp"

namespace {

struct options {
  int tokens = 256, hidden = 256, repeats = 20;
  float dropout = 0.1f;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokens") o.tokens = std::atoi(argv[i + 1]);
    else if (flag == "--hidden") o.hidden = std::atoi(argv[i + 1]);
    else if (flag == "--dropout") o.dropout = float(std::atof(argv[i + 1]));
    else if (flag == "--repeats") o.repeats = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_elementwise: unknown option %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (o.tokens <= 0 || o.hidden <= 0 || o.repeats <= 0 || o.dropout < 0 || o.dropout >= 1) {
    std::fprintf(stderr, "bench_elementwise: --tokens, --hidden and --repeats must be positive, --dropout in [0, 1)\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  namespace k = mactor::kernels;
  const options o = parse(argc, argv);
  k::set_kernel_threads(1);
  const std::size_t n = std::size_t(o.tokens) * o.hidden;
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<float> x(n), branch(n), residual(n), y(n), out(n), mean(o.tokens), rstd(o.tokens);
  std::vector<float> gamma(o.hidden, 1.0f), beta(o.hidden, 0.0f), bias(o.hidden, 0.01f);
  for (auto* v : {&x, &branch, &residual})
    for (float& e : *v) e = normal(gen);
  // One layer's forward: per block (attention, MLP) a norm, then the branch's bias-dropout-add.
  const auto layer = [&](std::uint64_t step) {
    for (int block = 0; block < 2; ++block) {
      k::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), o.tokens, o.hidden,
                           1e-5f, false);
      k::bias_dropout_add(out.data(), residual.data(), branch.data(), bias.data(), o.tokens, o.hidden, o.dropout,
                          k::dropout_stream(1, block, 0, step), 0);
    }
  };
  const double act = sizeof(float), mask = o.dropout > 0 ? 1 : 0;
  const double bytes = 2.0 * double(n) * (2 * act + 3 * act + mask);
  const int calls = std::max(1, int(64e6 / bytes));  // ~64 MB a round
  double best = 1e30;
  layer(0);
  for (int r = 0; r < o.repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) layer(std::uint64_t(r * calls + c));
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls);
  }
  std::printf("| kernels | tokens | hidden | bytes per layer | best us | GB/s |\n|---|---|---|---|---|---|\n");
  std::printf("| 2 x (layer norm + bias-dropout-add), forward | %d | %d | %.0f | %.1f | %.2f |\n", o.tokens, o.hidden,
              bytes, best * 1e6, bytes / best / 1e9);
  std::printf("elementwise GB/s: %.3f\n", bytes / best / 1e9);
  return 0;
}
