// The MoE layer's step on the CPU against the dense MLP of equal active parameters (an MLP of
// topk * moe_ffn width): forward and backward milliseconds, median of the repeats. Prints a table.
// On the CPU --moe-grouped-gemm runs the same per-expert GEMM loop as SequentialMLP (only the
// parameter names differ), so its row measures that loop again rather than a fused kernel.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/group.hpp"
#include "model/mlp.hpp"
#include "model/moe_layer.hpp"
#include "tensor/tensor.hpp"

using namespace mactor;

namespace {

constexpr int hidden = 256, moe_ffn = 512, experts = 8, topk = 2, seq = 512, batch = 2, repeats = 5;

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

std::vector<float> random_rows(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(std::size_t(seq) * batch * hidden);
  for (auto& x : v) x = normal(rng);
  return v;
}

tensor::tensor_view view(std::vector<float>& v) { return tensor::view_of(std::span<float>(v)); }

void row(const char* name, double fwd, double bwd) {
  std::printf("| %-36s | %9.2f | %9.2f | %9.2f |\n", name, fwd, bwd, fwd + bwd);
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

}  // namespace

int main() {
  std::printf("MoE layer vs dense MLP of equal active parameters: %d tokens, hidden %d, %d experts of ffn %d, top-%d, "
              "SwiGLU, fp32 (median of %d)\n\n",
              seq * batch, hidden, experts, moe_ffn, topk, repeats);
  std::printf("| %-36s | %9s | %9s | %9s |\n", "case", "fwd ms", "bwd ms", "step ms");
  std::printf("|%s|%s|%s|%s|\n", std::string(38, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(11, '-').c_str());
  bench_dense();
  bench_moe("MoE, SequentialMLP (expert loop)", false);
  bench_moe("MoE, --moe-grouped-gemm (same loop)", true);
  return 0;
}
