// --moe-router-load-balancing-type global_aux_loss: two ranks of the global batch (threads over
// local groups), each routing its own tokens over two micro-batches, against (1) the loss written
// out in this test from the router's logits (the tokens per expert summed over both ranks and
// averaged over the micro-batches so far, Megatron's switch_load_balancing_loss_func on them),
// and (2) one rank routing both ranks' tokens: its loss is the two ranks' sum, and so is its
// router weight gradient. A reset (after each global batch) restarts the running average.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <thread>

#include "model/local_group.hpp"
#include "model/moe_router.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

constexpr int experts = 4, topk = 2, hidden = 12, rows = 10;
constexpr double coeff = 0.1;

model::gpt_model_config router_config() {
  model::gpt_model_config c;
  c.num_layers = 1, c.hidden_size = hidden, c.ffn_hidden_size = 16, c.init_method_std = 0.3f, c.seed = 5;
  c.params_dtype = tensor::dtype::float64;
  c.moe.num_experts = experts, c.moe.router_topk = topk;
  c.moe.load_balancing = model::moe_load_balancing::global_aux_loss, c.moe.aux_loss_coeff = coeff;
  return c;
}

std::vector<double> tokens(int n, int seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> x(std::size_t(n) * hidden);
  for (auto& v : x) v = d(rng);
  return x;
}

struct routed {
  std::vector<double> logits;
  std::vector<int> top;
  double loss = 0;
  std::vector<double> dweight;
};

// One forward (and backward with no gradient from the probabilities) of `router` on x.
routed route(model::moe_router& router, model::parameter_store& store, std::vector<double> x) {
  const int n = int(x.size() / hidden);
  store.zero_grad();
  router.forward(store, tensor::view_of(std::span<const double>(x)), n, 1, true);
  routed r{router.logits(), router.top(), router.aux_losses().global_load_balancing_loss, {}};
  std::vector<double> dprobs(std::size_t(n) * topk, 0.0), dx(x.size(), 0.0);
  router.backward(store, dprobs, tensor::view_of(std::span<const double>(x)), tensor::view_of(std::span<double>(dx)), 1.0);
  r.dweight = test::copy_of<double>(store.grad(0));
  return r;
}

// Megatron's switch_load_balancing_loss_func / coefficient for this rank's logits with the
// given tokens per expert and total token count.
double expected_loss(const std::vector<double>& logits, const std::vector<double>& tokens_per_expert, double total) {
  double sum = 0;
  for (std::size_t t = 0; t < logits.size() / experts; ++t) {
    double z = 0, m = -1e300;
    for (int e = 0; e < experts; ++e) m = std::max(m, logits[t * experts + e]);
    for (int e = 0; e < experts; ++e) z += std::exp(logits[t * experts + e] - m);
    for (int e = 0; e < experts; ++e) sum += std::exp(logits[t * experts + e] - m) / z * tokens_per_expert[e];
  }
  return sum * experts / (topk * total * total);
}

}  // namespace

TEST_CASE("global_aux_loss counts every rank's tokens, averages them over the micro-batches and sums to one rank's loss") {
  const auto c = router_config();
  auto groups = model::make_local_groups(2);
  std::vector<std::unique_ptr<model::parameter_store>> store_of;
  std::vector<std::unique_ptr<model::moe_router>> routers;
  for (int r = 0; r < 2; ++r) {
    store_of.push_back(std::make_unique<model::parameter_store>(tensor::dtype::float64, tensor::dtype::float64));
    routers.push_back(std::make_unique<model::moe_router>(*store_of[r], "router", c, nullptr, groups[r].get()));
    store_of[r]->allocate(c.seed, 0, 1);
  }
  model::parameter_store one_store(tensor::dtype::float64, tensor::dtype::float64);
  model::single_group alone;
  model::moe_router one(one_store, "router", c, nullptr, &alone);
  one_store.allocate(c.seed, 0, 1);

  std::vector<double> running(experts, 0.0);
  for (int step = 1; step <= 3; ++step) {
    if (step == 3) {  // a new global batch
      for (auto& r : routers) r->reset_global_tokens();
      one.reset_global_tokens();
      running.assign(experts, 0.0);
    }
    const int micro = step == 3 ? 1 : step;
    INFO("step " << step);
    std::vector<std::vector<double>> x = {tokens(rows, 10 * step), tokens(rows, 10 * step + 1)};
    std::vector<routed> got(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) threads.emplace_back([&, r] { got[r] = route(*routers[r], *store_of[r], x[r]); });
    for (auto& t : threads) t.join();
    for (const auto& g : got)
      for (int e : g.top) running[std::size_t(e)] += 1;
    std::vector<double> average(experts);
    for (int e = 0; e < experts; ++e) average[e] = static_cast<float>(running[e] / micro);
    for (int r = 0; r < 2; ++r) CHECK(got[r].loss == Approx(expected_loss(got[r].logits, average, 2.0 * rows)).epsilon(1e-12));
    // One rank routing both ranks' tokens: the same total, counts and average.
    auto both = x[0];
    both.insert(both.end(), x[1].begin(), x[1].end());
    const auto single = route(one, one_store, both);
    CHECK(single.loss == Approx(got[0].loss + got[1].loss).epsilon(1e-12));
    REQUIRE(single.dweight.size() == got[0].dweight.size());
    double worst = 0, largest = 0;
    for (std::size_t i = 0; i < single.dweight.size(); ++i) {
      worst = std::max(worst, std::abs(single.dweight[i] - got[0].dweight[i] - got[1].dweight[i]));
      largest = std::max(largest, std::abs(single.dweight[i]));
    }
    CHECK(largest > 1e-6);  // the loss moves the router
    CHECK(worst <= 1e-12 * largest + 1e-15);
  }
}
