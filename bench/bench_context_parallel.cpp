// Ring attention (--cp-comm-type p2p) on two context-parallel ranks of one process, each a
// thread with its own in-process transport and the ring collectives (comm/collectives.hpp) as
// training uses them: how much of the key/value transfer time the block compute hides.
// Per sequence length, forward and backward: the compute time, the transfers' time (from each
// start until it was seen done: ring attention drives its shifts between tiles), the wait that was
// left after the compute (the exposed part), and the hidden fraction
// 1 - wait / transfer. Rank 0's numbers, median of the repeats by compute time; fp32, batch 1.
// Beside them, one rank's attention kernel on the whole sequence (what a rank runs without
// context parallelism, probabilities kept for the backward), as many copies at once as the ring
// has ranks so that both run with the cores equally busy: a ring rank's compute against half of
// it is the ring's own cost (the backward recomputes the probabilities and redraws dropout);
// scripts/calibrate_cpu_system.py turns that ratio into the CPU system file's
// ring_attention_efficiency.
// Usage: bench_context_parallel [heads head_dim max_seq [min_seq [dropout]]]
//        (defaults 2 64 8192 2048 0; Megatron's attention dropout is 0.1)
#include <algorithm>
#include <chrono>
#include <utility>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "comm/collectives.hpp"
#include "comm/local_transport.hpp"
#include "kernels/attention.hpp"
#include "model/group.hpp"
#include "model/ring_attention.hpp"
#include "training/parallel_context.hpp"
#include "bench/random_values.hpp"

using namespace mactor;
using bench::randn;

namespace {

constexpr int cp = 2, repeats = 3;

struct timed_pass {
  model::ring_timing forward, backward;
};

// One rank's repeats of forward + backward; returns its timings.
std::vector<timed_pass> run_rank(int rank, comm::local_fabric& fabric, const kernels::attention_dims& full, float dropout) {
  auto t = fabric.connect(rank);
  comm::transport_communicator c(*t, {0, 1}, 1);
  auto cp_group = training::make_model_group(c);
  const model::sequence_shard shard{full.seq, cp, rank};
  kernels::attention_dims d = full;
  d.seq = shard.local_length();
  const std::int64_t rows = std::int64_t(d.seq) * d.batch, out_width = std::int64_t(d.heads) * d.head_dim;
  auto qkv = randn(std::size_t(rows * d.qkv_width()), 1 + rank), dout = randn(std::size_t(rows * out_width), 3 + rank);
  std::vector<float> out(std::size_t(rows * out_width)), lse(std::size_t(rows * d.heads)), dqkv(qkv.size());
  model::ring_attention ring(*cp_group, shard);
  const float scale = 1.0f / std::sqrt(float(d.head_dim));
  std::vector<timed_pass> passes;
  for (int r = 0; r < repeats; ++r) {
    timed_pass p;
    ring.forward(tensor::view_of(std::span<float>(out)), tensor::view_of(std::span<float>(lse)),
                 tensor::view_of(std::span<const float>(qkv)), d, scale, dropout, 7);
    p.forward = ring.timing();
    ring.backward(tensor::view_of(std::span<float>(dqkv)), tensor::view_of(std::span<const float>(dout)),
                  tensor::view_of(std::span<const float>(qkv)), tensor::view_of(std::span<const float>(out)),
                  tensor::view_of(std::span<const float>(lse)), d, scale, dropout, 7);
    p.backward = ring.timing();
    passes.push_back(p);
  }
  t->shutdown();
  return passes;
}

void print_row(int seq, const char* pass, const model::ring_timing& t, double block_mib) {
  const double hidden = t.transfer_s > 0 ? 100.0 * (1.0 - t.wait_s / t.transfer_s) : 0.0;
  std::printf("| %6d | %-8s | %9.3f | %8d | %11.3f | %11.3f | %9.3f | %7.1f%% |\n", seq, pass, block_mib, t.transfers,
              1e3 * t.compute_s, 1e3 * t.transfer_s, 1e3 * t.wait_s, std::max(0.0, hidden));
}

// One rank's attention kernel on the whole sequence: forward and backward compute seconds,
// median of the repeats.
std::pair<double, double> one_rank_seconds(const kernels::attention_dims& d, float dropout) {
  const std::int64_t rows = std::int64_t(d.seq) * d.batch, out_width = std::int64_t(d.heads) * d.head_dim;
  auto qkv = randn(std::size_t(rows * d.qkv_width()), 5), dout = randn(std::size_t(rows * out_width), 6);
  std::vector<float> out(std::size_t(rows * out_width)), dqkv(qkv.size());
  std::vector<float> probs(std::size_t(d.batch) * d.heads * d.seq * d.seq);
  const float scale = 1.0f / std::sqrt(float(d.head_dim));
  std::vector<double> fw, bw;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    kernels::attention_forward(out.data(), probs.data(), qkv.data(), d, scale, dropout, 7);
    const auto mid = std::chrono::steady_clock::now();
    kernels::attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), d, scale, dropout, 7);
    fw.push_back(std::chrono::duration<double>(mid - start).count());
    bw.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - mid).count());
  }
  std::sort(fw.begin(), fw.end()), std::sort(bw.begin(), bw.end());
  return {fw[fw.size() / 2], bw[bw.size() / 2]};
}

model::ring_timing median_by_compute(std::vector<model::ring_timing> v) {
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.compute_s < b.compute_s; });
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  kernels::attention_dims full;
  full.batch = 1;
  full.heads = argc > 1 ? std::atoi(argv[1]) : 2;
  full.groups = full.heads;
  full.head_dim = argc > 2 ? std::atoi(argv[2]) : 64;
  full.total_heads = full.heads;
  const int max_seq = argc > 3 ? std::atoi(argv[3]) : 8192, min_seq = argc > 4 ? std::atoi(argv[4]) : 2048;
  const float dropout = argc > 5 ? float(std::atof(argv[5])) : 0.0f;
  std::printf("ring attention, cp = %d, %d heads of %d, batch 1, fp32, attention dropout %g; rank 0, median of %d by "
              "compute; 'one rank': the attention kernel on the whole sequence\n",
              cp, full.heads, full.head_dim, double(dropout), repeats);
  std::printf("| seq    | pass     | block MiB | messages | compute ms  | transfer ms | exposed ms | hidden   |\n");
  std::printf("|--------|----------|-----------|----------|-------------|-------------|------------|----------|\n");
  for (int seq = min_seq; seq <= max_seq; seq *= 2) {
    full.seq = seq;
    comm::local_fabric fabric(cp);
    std::vector<timed_pass> passes[cp];
    std::vector<std::thread> ranks;
    for (int r = 0; r < cp; ++r) ranks.emplace_back([&, r] { passes[r] = run_rank(r, fabric, full, dropout); });
    for (auto& t : ranks) t.join();
    std::vector<model::ring_timing> fw, bw;
    for (const auto& p : passes[0]) fw.push_back(p.forward), bw.push_back(p.backward);
    const double block = double(seq) / cp * full.groups * 2 * full.head_dim * sizeof(float) / (1 << 20);
    print_row(seq, "forward", median_by_compute(fw), block);
    print_row(seq, "backward", median_by_compute(bw), 2 * block);
    std::pair<double, double> one[cp];
    std::vector<std::thread> copies;
    for (int r = 0; r < cp; ++r) copies.emplace_back([&, r] { one[r] = one_rank_seconds(full, dropout); });
    for (auto& t : copies) t.join();
    std::printf("| %6d | one rank | %9s | %8s | %.3f + %.3f | %11s | %10s | %8s |\n", seq, "-", "-", 1e3 * one[0].first,
                1e3 * one[0].second, "-", "-", "-");
  }
  return 0;
}
