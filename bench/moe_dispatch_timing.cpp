// The MoE layer's dispatch and combine without the router and the experts: the same calls
// moe_layer::forward makes between them, timed one iteration at a time.
#include "bench/moe_dispatch_timing.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/convert.hpp"
#include "model/moe_expert_exchange.hpp"
#include "model/moe_token_dispatcher.hpp"

namespace mactor::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// top[t * topk + j]: token t's j-th expert, topk distinct experts per token.
std::vector<int> random_routing(const moe_dispatch_shape& s, int seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::vector<int> experts(static_cast<std::size_t>(s.experts)), top;
  std::iota(experts.begin(), experts.end(), 0);
  top.reserve(std::size_t(s.tokens) * s.topk);
  for (int t = 0; t < s.tokens; ++t) {
    std::shuffle(experts.begin(), experts.end(), rng);
    top.insert(top.end(), experts.begin(), experts.begin() + s.topk);
  }
  return top;
}

tensor::tensor filled(std::int64_t rows, std::int64_t cols, tensor::dtype type, float value) {
  tensor::tensor t({rows, cols}, type, tensor::memory_kind::activations);
  const std::vector<float> v(std::size_t(rows * cols), value);
  kernels::convert(t.view(), tensor::view_of(std::span<const float>(v)));
  return t;
}

}  // namespace

moe_dispatch_times time_moe_dispatch(model::group& ep, const moe_dispatch_shape& s, int iters,
                                     const std::function<void()>& barrier) {
  const std::vector<int> top = random_routing(s, 17 + ep.rank());
  const std::vector<char> kept(top.size(), 1);
  const std::int64_t permuted_rows = std::int64_t(top.size());
  model::moe_token_dispatcher dispatcher(s.experts, s.topk);
  model::moe_expert_exchange exchange(s.experts, ep);
  auto x = filled(s.tokens, s.hidden, s.type, 0.5f), out = filled(s.tokens, s.hidden, s.type, 0.0f);
  auto permuted = filled(permuted_rows, s.hidden, s.type, 0.0f), probs = filled(permuted_rows, 1, s.type, 0.5f);
  auto expert_out = filled(permuted_rows, s.hidden, s.type, 0.0f);
  tensor::tensor received, received_probs;
  std::vector<double> permute_ms, dispatch_exchange_ms, combine_exchange_ms, unpermute_ms;
  for (int i = 0; i < iters; ++i) {
    auto t0 = clock_type::now();
    dispatcher.plan(top, kept, s.tokens);
    dispatcher.dispatch(x.view(), permuted.view(), s.hidden);
    permute_ms.push_back(ms_since(t0));
    barrier();
    t0 = clock_type::now();
    exchange.plan(dispatcher.tokens_per_expert());
    const std::int64_t m = exchange.received_rows();
    if (received.numel() != m * s.hidden) {
      received = filled(m, s.hidden, s.type, 0.0f);
      received_probs = filled(m, 1, s.type, 0.0f);
    }
    exchange.to_experts(permuted.view(), received.view(), s.hidden);
    exchange.to_experts(probs.view(), received_probs.view(), 1);
    dispatch_exchange_ms.push_back(ms_since(t0));
    barrier();  // the identity expert: its output is its input
    t0 = clock_type::now();
    exchange.from_experts(received.view(), expert_out.view(), s.hidden);
    combine_exchange_ms.push_back(ms_since(t0));
    t0 = clock_type::now();
    dispatcher.combine(expert_out.view(), out.view(), s.tokens, s.hidden);
    unpermute_ms.push_back(ms_since(t0));
  }
  const int me = ep.rank(), local = s.experts / ep.size();
  std::int64_t sent_rows = 0;
  for (int e = 0; e < s.experts; ++e)
    if (e / local != me) sent_rows += dispatcher.tokens_per_expert()[std::size_t(e)];
  moe_dispatch_times times;
  times.permute_ms = median_of(permute_ms);
  times.dispatch_exchange_ms = median_of(dispatch_exchange_ms);
  times.combine_exchange_ms = median_of(combine_exchange_ms);
  times.unpermute_ms = median_of(unpermute_ms);
  times.sent_mib = double(sent_rows) * s.hidden * double(tensor::size_of(s.type)) / (1 << 20);
  return times;
}

}  // namespace mactor::bench
