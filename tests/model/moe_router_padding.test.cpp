// --moe-router-padding-for-fp8: the dispatcher pads each expert's rows to a multiple of 16 (32
// under mxfp8) exactly as megatron-core's own pad_routing_map pads the routing map (run in
// tests/model/moe_router_padding_reference.py on the same maps, with dropped choices and experts
// that need no padding or cannot be filled); in an fp8 MoE layer the padding rows (probability
// 0) leave the output and the input gradient bit for bit as they were, while each expert's fc1
// takes its delayed input scale from the amax over its real and padding rows together.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/fp8_linear.hpp"
#include "model/moe_token_dispatcher.hpp"
#include "tests/model/moe_reference_case.hpp"
#include "tests/model/optimizer_python_reference.hpp"

namespace {

struct routing_case {
  int rows = 0, experts = 0, topk = 0, pad = 0;
  std::vector<int> top;
  std::vector<char> kept;
};

// Distinct experts per token, about one choice in six dropped.
routing_case random_case(std::mt19937& gen, int rows, int experts, int topk, int pad) {
  routing_case k{rows, experts, topk, pad, {}, {}};
  std::vector<int> order(static_cast<std::size_t>(experts));
  for (int t = 0; t < rows; ++t) {
    for (int e = 0; e < experts; ++e) order[std::size_t(e)] = e;
    std::shuffle(order.begin(), order.end(), gen);
    for (int j = 0; j < topk; ++j) {
      k.top.push_back(order[std::size_t(j)]);
      k.kept.push_back(std::uniform_int_distribution<int>(0, 5)(gen) != 0);
    }
  }
  return k;
}

// The routing map the router hands the dispatcher: token t routed to expert e.
std::vector<std::vector<int>> routing_map(const routing_case& k) {
  std::vector<std::vector<int>> map(std::size_t(k.rows), std::vector<int>(std::size_t(k.experts), 0));
  for (int t = 0; t < k.rows; ++t)
    for (int j = 0; j < k.topk; ++j)
      if (k.kept[std::size_t(t * k.topk + j)]) map[std::size_t(t)][std::size_t(k.top[std::size_t(t * k.topk + j)])] = 1;
  return map;
}

}  // namespace

TEST_CASE("router padding for fp8 pads each expert's rows as megatron-core's pad_routing_map does") {
  std::mt19937 gen(17);
  std::vector<routing_case> cases;
  for (int rows : {5, 17, 40, 64})
    for (int experts : {4, 8})
      for (int topk : {1, 2, 3})
        for (int pad : {4, 16, 32}) cases.push_back(random_case(gen, rows, experts, topk, pad));
  nlohmann::json in;
  for (const auto& k : cases) in["cases"].push_back({{"map", routing_map(k)}, {"pad", k.pad}});
  const auto out = test::run_python_reference("moe_router_padding_reference.py", "pad", in);
  REQUIRE(out.at("padded").size() == cases.size());
  std::size_t padded_rows = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& k = cases[i];
    INFO("rows " << k.rows << ", experts " << k.experts << ", top-" << k.topk << ", pad " << k.pad);
    const auto want = out["padded"][i].get<std::vector<std::vector<int>>>();
    const auto routed = routing_map(k);
    model::moe_token_dispatcher d(k.experts, k.topk);
    d.plan(k.top, k.kept, k.rows, k.pad);
    // Megatron's permute order: expert by expert, each expert's tokens in order.
    std::vector<std::pair<int, int>> rows_want, rows_got;
    for (int e = 0; e < k.experts; ++e)
      for (int t = 0; t < k.rows; ++t)
        if (want[std::size_t(t)][std::size_t(e)]) rows_want.emplace_back(e, t);
    std::size_t i_row = 0;
    for (int e = 0; e < k.experts; ++e)
      for (std::int64_t n = 0; n < d.tokens_per_expert()[std::size_t(e)]; ++n, ++i_row) {
        const auto choice = d.choice_of()[i_row];
        const int t = choice >= 0 ? int(choice / k.topk) : -1;
        if (choice >= 0) {
          CHECK(k.top[std::size_t(choice)] == e);  // a real row: the token's own choice of e
          rows_got.emplace_back(e, t);
        } else {
          ++padded_rows;
          // A padding row: a token not routed to e, found through the gathered rows.
          std::vector<float> x(std::size_t(k.rows)), row(std::size_t(d.permuted_rows()));
          for (int s = 0; s < k.rows; ++s) x[std::size_t(s)] = float(s);
          d.dispatch(test::view(x), test::view(row), 1);
          const int token = int(row[i_row]);
          CHECK(routed[std::size_t(token)][std::size_t(e)] == 0);
          rows_got.emplace_back(e, token);
        }
      }
    CHECK(rows_got == rows_want);
  }
  CHECK(padded_rows > 100);  // the cases do pad
}

TEST_CASE("padding rows leave an fp8 MoE layer's output and input gradient as they were, and join its amaxes") {
  moe_case k{mixtral_like()};
  k.seq = 6, k.batch = 4;  // 24 tokens, top-2 of 4 experts: about 12 rows per expert, padded to 16
  k.config.moe.aux_loss_coeff = 0, k.config.moe.z_loss_coeff.reset();
  k.config.fp8.enabled = true, k.config.fp8.recipe = model::fp8_recipe::delayed;
  k.config.fp8.fp8 = model::fp8_format::hybrid, k.config.fp8.fp8_amax_history_len = 1;
  moe_case padded = k;
  padded.config.moe.router_padding_multiple = 16;
  layer_run plain(k), with(padded);
  for (auto n : with.layer.dispatcher().tokens_per_expert()) CHECK(n % 16 == 0);
  // The delayed recipe's first forward and backward quantize with scale 1, each row by itself:
  // rows of probability 0 add exact zeros to the combine and to the input gradient.
  CHECK(with.out == plain.out);
  CHECK(with.dx == plain.dx);
  // The weight gradients sum zero rows more (another GEMM blocking at most).
  for (std::size_t i = 0; i < plain.store.all().size(); ++i)
    CHECK(test::relative_error(test::copy_of<float>(with.store.all()[i].grad), test::copy_of<float>(plain.store.all()[i].grad)) <
          1e-6);
  // Each expert's fc1 input scale came from the amax of its rows: here computed from the
  // router's choices and the padding rule written out (the first tokens not routed to it).
  const auto& top = with.layer.router().top();
  const auto& kept = with.layer.router().kept();
  const int rows = k.seq * k.batch, h = k.config.hidden_size, topk = k.config.moe.router_topk;
  int raised = 0;
  for (int e = 0; e < k.config.moe.num_experts; ++e) {
    std::vector<char> member(std::size_t(rows), 0);
    int count = 0;
    for (int t = 0; t < rows; ++t)
      for (int j = 0; j < topk; ++j)
        if (top[std::size_t(t * topk + j)] == e && kept[std::size_t(t * topk + j)]) member[std::size_t(t)] = 1, ++count;
    float real = 0, all = 0;
    int pad = (16 - count % 16) % 16;
    for (int t = 0; t < rows; ++t) {
      const bool padding = !member[std::size_t(t)] && pad > 0;
      if (!member[std::size_t(t)] && !padding) continue;
      pad -= padding;
      for (int c = 0; c < h; ++c) {
        const float v = std::fabs(with.x[std::size_t(t * h + c)]);
        all = std::max(all, v);
        if (member[std::size_t(t)]) real = std::max(real, v);
      }
    }
    auto fc1_input_scale = [&](layer_run& r) {
      auto& store = r.store;
      for (std::size_t i = 0; i < store.fp8_linears().size(); ++i)
        if (store[store.fp8_weights()[i]].name == expert_weight(k, e, 1)) return store.fp8_linears()[i]->input_scaling().scale();
      FAIL("no fp8 linear for " << expert_weight(k, e, 1));
      return 0.0f;
    };
    INFO("expert " << e);
    CHECK(fc1_input_scale(with) == Approx(448.0 / all).epsilon(1e-6));
    CHECK(fc1_input_scale(plain) == Approx(448.0 / real).epsilon(1e-6));
    raised += all > real;
  }
  CHECK(raised > 0);  // the padding rows raised some expert's amax, so its scale moved
}
