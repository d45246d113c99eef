// Mamba-2's scan on the CPU: the chunked SSD kernel (forward, and forward + backward) against
// the sequential recurrence h_t = exp(dt A) h_{t-1} + dt x_t B_t^T, y_t = h_t C_t + D x_t, at
// sequence lengths 256..2048. Milliseconds, median of the repeats, fp32. Prints a table.
// Usage: bench_mamba [heads head_dim state chunk]   (defaults 8 64 128 128, one group, batch 1)
// The chunked form does more arithmetic than the recurrence (4pn + 2Qp against 4pn per step and
// head) and wins only because it runs it as GEMMs; with subnormal decays in those GEMMs (before
// kernels/cpu/ssd_chunk.hpp's decay_exp flushed them) it ran 3-6x slower than the recurrence.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "kernels/ssd_scan.hpp"
#include "bench/random_values.hpp"

using namespace mactor;
using bench::randn;

namespace {

constexpr int repeats = 5;

double median_ms(const std::function<void()>& f) {
  std::vector<double> ms;
  f();  // warm up
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The recurrence step by step: O(l p n) per head, one rank-1 update and one readout per step.
void sequential_scan(float* y, const float* x, const float* dt_raw, const float* A_log,
                     const float* B, const float* C, const float* D, const float* dt_bias,
                     const kernels::ssd_shape& s) {
  const int P = s.head_dim, N = s.state, H = s.heads, G = s.groups;
#pragma omp parallel for schedule(static) collapse(2)
  for (int b = 0; b < s.batch; ++b)
    for (int hd = 0; hd < H; ++hd) {
      const int g = hd / (H / G);
      const float A = -std::exp(A_log[hd]);
      std::vector<float> h(std::size_t(P) * N, 0.f);
      for (int t = 0; t < s.seq; ++t) {
        const std::size_t r = std::size_t(b) * s.seq + t;
        const float u = dt_raw[r * H + hd] + dt_bias[hd];
        const float dt = u > 20.f ? u : std::log1p(std::exp(u)), decay = std::exp(dt * A);
        const float* xt = x + (r * H + hd) * P;
        const float* Bt = B + (r * G + g) * N;
        const float* Ct = C + (r * G + g) * N;
        for (int p = 0; p < P; ++p) {
          float* hp = h.data() + std::size_t(p) * N;
          const float dx = dt * xt[p];
          float acc = 0.f;
          for (int n = 0; n < N; ++n) {
            hp[n] = decay * hp[n] + dx * Bt[n];
            acc += hp[n] * Ct[n];
          }
          y[(r * H + hd) * P + p] = acc + D[hd] * xt[p];
        }
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  kernels::ssd_shape s{.batch = 1, .heads = 8, .head_dim = 64, .groups = 1, .state = 128,
                       .chunk = 128};
  if (argc == 5)
    s.heads = std::atoi(argv[1]), s.head_dim = std::atoi(argv[2]), s.state = std::atoi(argv[3]),
    s.chunk = std::atoi(argv[4]);
  std::printf("heads %d head_dim %d state %d groups %d chunk %d batch %d (fp32)\n", s.heads,
              s.head_dim, s.state, s.groups, s.chunk, s.batch);
  std::printf("%6s %14s %14s %9s %18s %12s\n", "seq", "sequential_ms", "chunked_ms", "speedup",
              "chunked_fwd_bwd_ms", "max_abs_diff");
  for (int seq : {256, 512, 1024, 2048}) {
    s.seq = seq;
    const std::size_t rows = std::size_t(s.batch) * seq;
    const auto x = randn(rows * s.heads * s.head_dim, 1, 1.f), dt = randn(rows * s.heads, 2, 1.f);
    const auto B = randn(rows * s.groups * s.state, 3, 0.3f), C = randn(B.size(), 4, 0.3f);
    const auto A_log = randn(s.heads, 5, 0.5f), D = randn(s.heads, 6, 1.f);
    const auto bias = randn(s.heads, 7, 0.5f), dy = randn(x.size(), 8, 1.f);
    std::vector<float> y_seq(x.size()), y(x.size()), states(s.states_size());
    std::vector<float> dx(x.size()), ddt(dt.size()), dB(B.size()), dC(C.size());
    std::vector<float> dA(s.heads), dD(s.heads), dbias(s.heads);
    const double t_seq = median_ms([&] {
      sequential_scan(y_seq.data(), x.data(), dt.data(), A_log.data(), B.data(), C.data(),
                      D.data(), bias.data(), s);
    });
    auto forward = [&] {
      kernels::ssd_scan_forward<float>(y.data(), states.data(), x.data(), dt.data(),
                                       A_log.data(), B.data(), C.data(), D.data(), bias.data(), s);
    };
    const double t_chunk = median_ms(forward);
    const double t_both = median_ms([&] {
      forward();
      kernels::ssd_scan_backward<float>(dx.data(), ddt.data(), dA.data(), dB.data(), dC.data(),
                                        dD.data(), dbias.data(), dy.data(), states.data(),
                                        x.data(), dt.data(), A_log.data(), B.data(), C.data(),
                                        D.data(), bias.data(), s);
    });
    float diff = 0.f;
    for (std::size_t i = 0; i < y.size(); ++i) diff = std::max(diff, std::abs(y[i] - y_seq[i]));
    std::printf("%6d %14.2f %14.2f %8.2fx %18.2f %12.2e\n", seq, t_seq, t_chunk, t_seq / t_chunk,
                t_both, diff);
  }
}
