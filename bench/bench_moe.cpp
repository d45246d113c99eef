// The MoE layer's step on the CPU against the dense MLP of equal active parameters (an MLP of
// topk * moe_ffn width): forward and backward milliseconds, median of the repeats. Prints a table.
// Then the 8 experts alone (their GEMMs and activation): SequentialMLP's loop, one expert after
// the other, against --moe-grouped-gemm, every expert at once over the threads (each expert's
// GEMMs whole on one thread), with balanced and skewed routing, and the ratio in the same run.
// Last, --delay-wgrad-compute at EP2 (two in-process ranks, one thread each, whose all-to-all is a
// copy between them): the backward with and without the experts' weight gradients overlapping
// the dispatch's backward all-to-all, and how much of that all-to-all the backward still waited for.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/random_values.hpp"
#include "model/group.hpp"
#include "model/local_group.hpp"
#include "model/mlp.hpp"
#include "model/moe_experts.hpp"
#include "model/moe_layer.hpp"
#include "tensor/tensor.hpp"

using namespace mactor;

namespace {

constexpr int hidden = 256, moe_ffn = 512, experts = 8, topk = 2, seq = 512, batch = 2, repeats = 9;

model::gpt_model_config base() {
  model::gpt_model_config c;
  c.num_layers = 2, c.hidden_size = hidden, c.swiglu = true, c.add_bias_linear = false;
  c.ffn_hidden_size = topk * moe_ffn;  // the dense model's MLP: the MoE's active width
  c.init_method_std = 0.02f;
  return c;
}

double median_ms(const std::function<void()>& f) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::vector<float> random_rows(unsigned seed) { return bench::randn(std::size_t(seq) * batch * hidden, seed); }

tensor::tensor_view view(std::vector<float>& v) { return tensor::view_of(std::span<float>(v)); }

void row(const char* name, double fwd, double bwd) {
  std::printf("| %-42s | %9.2f | %9.2f | %9.2f |\n", name, fwd, bwd, fwd + bwd);
}

void bench_moe(const char* name, bool grouped) {
  auto c = base();
  c.moe.num_experts = experts, c.moe.router_topk = topk, c.moe.ffn_hidden_size = moe_ffn;
  c.moe.aux_loss_coeff = 1e-2, c.moe.grouped_gemm = grouped;
  model::single_group tp;
  model::parameter_store store;
  model::moe_layer layer(store, "decoder.layers.0.mlp", c);
  store.allocate(c.seed, 0, 1);
  auto x = random_rows(1), dy = random_rows(2), out = x, dx = x;
  const double fwd = median_ms([&] { layer.forward(store, tp, view(x), view(out), seq, batch, true); });
  const double bwd = median_ms([&] { layer.backward(store, tp, view(dy), view(x), view(dx)); });
  row(name, fwd, bwd);
}

void bench_dense() {
  const auto c = base();
  model::single_group tp;
  model::parameter_store store;
  model::mlp dense(store, "decoder.layers.0.mlp", c, 1);
  store.allocate(c.seed, 0, 1);
  auto x = random_rows(1), dy = random_rows(2), out = x, dx = x;
  const double fwd = median_ms([&] { dense.forward(store, tp, view(x), view(out), seq * batch); });
  const double bwd = median_ms([&] { dense.backward(store, tp, view(dy), view(x), view(dx)); });
  row("dense MLP, ffn = topk x moe ffn", fwd, bwd);
}

// The experts alone on `counts` rows each (fp32, probabilities 1), forward plus backward.
struct experts_case {
  model::parameter_store store;
  std::unique_ptr<model::moe_experts> layer;
  std::vector<float> x, dy, out, dx, probs, dprobs;
  std::vector<std::int64_t> counts;

  experts_case(bool grouped, std::vector<std::int64_t> rows_per_expert) : counts(std::move(rows_per_expert)) {
    auto c = base();
    c.moe.num_experts = experts, c.moe.router_topk = topk, c.moe.ffn_hidden_size = moe_ffn, c.moe.grouped_gemm = grouped;
    layer = std::make_unique<model::moe_experts>(store, "decoder.layers.0.mlp.experts", c);
    store.allocate(c.seed, 0, 1);
    std::int64_t rows = 0;
    for (auto n : counts) rows += n;
    x = bench::randn(std::size_t(rows) * hidden, 3);
    dy = out = dx = x;
    probs.assign(std::size_t(rows), 1.0f), dprobs = probs;
  }
  double step_ms() {
    const auto t0 = std::chrono::steady_clock::now();
    layer->forward(store, view(x), view(probs), counts, view(out));
    layer->backward(store, view(dy), view(x), view(dx), view(dprobs));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

// Loop and grouped steps taken in turn, so both see the same machine load; medians.
void bench_grouped_vs_loop(const char* name, const std::vector<std::int64_t>& counts) {
  experts_case loop(false, counts), grouped(true, counts);
  loop.step_ms(), grouped.step_ms();  // warm-up: buffers allocated
  std::vector<double> a, b;
  for (int i = 0; i < repeats; ++i) a.push_back(loop.step_ms()), b.push_back(grouped.step_ms());
  std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
  const double l = a[a.size() / 2], g = b[b.size() / 2];
  std::printf("| %-40s | %9.2f | %10.2f | %9.2f |\n", name, l, g, l / g);
}

// Both EP2 ranks' MoE layers, forward then backward, `repeats` times; rank 0's median backward and
// its summed delayed-wgrad overlap (model::moe_layer::delayed_wgrad_timing).
struct ep2_result {
  double backward_ms = 0;
  model::transfer_timing overlap;
};

ep2_result bench_ep2(bool delay) {
  auto groups = model::make_local_groups(2);
  ep2_result result;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      omp_set_num_threads(1);
      auto c = base();
      c.moe.num_experts = experts, c.moe.router_topk = topk, c.moe.ffn_hidden_size = moe_ffn;
      c.moe.expert_parallel_size = 2, c.moe.expert_parallel_rank = r, c.moe.delay_wgrad_compute = delay;
      model::single_group tp;
      model::parameter_store store;
      model::moe_groups g;
      g.expert_parallel = groups[std::size_t(r)].get();
      model::moe_layer layer(store, "decoder.layers.0.mlp", c, g);
      store.allocate(c.seed, 0, 1);
      auto x = random_rows(1 + unsigned(r)), dy = random_rows(3 + unsigned(r)), out = x, dx = x;
      std::vector<double> ms;
      for (int i = 0; i < repeats; ++i) {
        layer.forward(store, tp, view(x), view(out), seq, batch, true);
        const auto t0 = std::chrono::steady_clock::now();
        layer.backward(store, tp, view(dy), view(x), view(dx));
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      if (r == 0) result = {ms[ms.size() / 2], layer.delayed_wgrad_timing()};
    });
  for (auto& t : ranks) t.join();
  return result;
}

}  // namespace

int main() {
  std::printf("MoE layer vs dense MLP of equal active parameters: %d tokens, hidden %d, %d experts of ffn %d, top-%d, "
              "SwiGLU, fp32 (median of %d)\n\n",
              seq * batch, hidden, experts, moe_ffn, topk, repeats);
  std::printf("| %-42s | %9s | %9s | %9s |\n", "case", "fwd ms", "bwd ms", "step ms");
  std::printf("|%s|%s|%s|%s|\n", std::string(44, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(11, '-').c_str());
  bench_dense();
  bench_moe("MoE, SequentialMLP (expert loop)", false);
  bench_moe("MoE, --moe-grouped-gemm (experts at once)", true);

  const std::int64_t per_expert = std::int64_t(seq) * batch * topk / experts;
  std::printf("\nThe %d experts alone (fc1, SwiGLU, fc2; forward + backward, fp32, %d threads): SequentialMLP's loop "
              "vs the grouped GEMM\n\n", experts, omp_get_max_threads());
  std::printf("| %-40s | %9s | %10s | %9s |\n", "routing", "loop ms", "grouped ms", "loop/grp");
  std::printf("|%s|%s|%s|%s|\n", std::string(42, '-').c_str(), std::string(11, '-').c_str(),
              std::string(12, '-').c_str(), std::string(11, '-').c_str());
  bench_grouped_vs_loop("balanced (256 rows each)", std::vector<std::int64_t>(experts, per_expert));
  std::vector<std::int64_t> skewed(experts, per_expert / 2);  // half the rows to expert 0
  skewed[0] = per_expert * experts - per_expert / 2 * (experts - 1);
  bench_grouped_vs_loop("skewed (expert 0: 1152 rows, others 128)", skewed);
  bench_grouped_vs_loop("small (16 rows each)", std::vector<std::int64_t>(experts, 16));

  std::printf("\n--delay-wgrad-compute at EP2 (2 in-process ranks, 1 thread each; rank 0, median of %d backwards)\n\n",
              repeats);
  std::printf("| %-34s | %9s | %16s | %14s | %8s |\n", "case", "bwd ms", "all-to-all ms", "waited ms", "hidden");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(11, '-').c_str(),
              std::string(18, '-').c_str(), std::string(16, '-').c_str(), std::string(10, '-').c_str());
  const auto in_line = bench_ep2(false), delayed = bench_ep2(true);
  std::printf("| %-34s | %9.2f | %16s | %14s | %8s |\n", "all-to-all in line", in_line.backward_ms, "-", "-", "0%");
  const auto& o = delayed.overlap;
  std::printf("| %-34s | %9.2f | %16.3f | %14.3f | %7.0f%% |\n", "--delay-wgrad-compute", delayed.backward_ms,
              o.transfer_s * 1e3 / o.transfers, o.wait_s * 1e3 / o.transfers,
              100.0 * (1.0 - o.wait_s / std::max(o.transfer_s, 1e-12)));
  return 0;
}
