// Under --moe-grouped-gemm the experts run at once over the threads (each expert's GEMMs whole on
// one thread; an expert holding more than a thread's share of the rows first, split as in the
// loop): the outputs, input gradients, probability gradients and every weight gradient equal
// SequentialMLP's loop bit for bit, with balanced, skewed and empty experts, in fp32, bf16 and fp8.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "kernels/convert.hpp"
#include "model/moe_experts.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

constexpr int hidden = 64, experts = 8;

struct expert_pass {
  std::vector<float> out, dx, dprobs, grads;
};

// (expert, linear) of a weight named by SequentialMLP (local_experts.<e>.linear_fc<k>.weight) or
// TEGroupedMLP (linear_fc<k>.weight<e>): the two forms' weights are matched by it.
std::pair<int, int> expert_and_linear(const std::string& name) {
  std::smatch m;
  if (std::regex_search(name, m, std::regex(R"(local_experts\.(\d+)\.linear_fc(\d)\.weight$)")))
    return {std::stoi(m[1]), std::stoi(m[2])};
  REQUIRE(std::regex_search(name, m, std::regex(R"(linear_fc(\d)\.weight(\d+)$)")));
  return {std::stoi(m[2]), std::stoi(m[1])};
}

expert_pass run(bool grouped, const std::vector<std::int64_t>& counts, tensor::dtype type, bool fp8) {
  model::gpt_model_config c;
  c.num_layers = 1, c.hidden_size = hidden, c.ffn_hidden_size = 96, c.swiglu = true, c.add_bias_linear = false;
  c.init_method_std = 0.1f, c.seed = 7, c.params_dtype = type;
  c.moe.num_experts = experts, c.moe.router_topk = 1, c.moe.ffn_hidden_size = 96, c.moe.grouped_gemm = grouped;
  c.fp8.enabled = fp8, c.fp8.recipe = model::fp8_recipe::tensorwise;
  model::parameter_store store(type, tensor::dtype::float32);
  model::moe_experts layer(store, "decoder.layers.0.mlp.experts", c);
  store.allocate(c.seed, 0, 1);
  // The same weights in both forms, whatever their names.
  std::map<std::pair<int, int>, int> ids;
  for (int id = 0; id < int(store.all().size()); ++id) {
    const auto key = expert_and_linear(store[id].name);
    ids[key] = id;
    std::vector<float> w;
    for (double d : test::random_vector(std::size_t(store[id].numel), 100 + 10 * key.first + key.second, 0.1))
      w.push_back(float(d));
    kernels::convert(store.value(id), tensor::view_of(std::span<const float>(w)));
  }
  std::int64_t rows = 0;
  for (auto n : counts) rows += n;
  const auto make = [&](std::uint64_t seed, std::int64_t n, int width, tensor::dtype t) {
    tensor::tensor v({n, width}, t, tensor::memory_kind::activations);
    std::vector<float> values;
    for (double d : test::random_vector(std::size_t(n) * width, seed)) values.push_back(float(d));
    kernels::convert(v.view(), tensor::view_of(std::span<const float>(values)));
    return v;
  };
  auto x = make(1, rows, hidden, type), dy = make(2, rows, hidden, type), p = make(3, rows, 1, tensor::dtype::float32);
  tensor::tensor out({rows, hidden}, type, tensor::memory_kind::activations),
      dx({rows, hidden}, type, tensor::memory_kind::activations),
      dp({rows, 1}, tensor::dtype::float32, tensor::memory_kind::activations);
  store.zero_grad();
  layer.forward(store, x.view(), p.view(), counts, out.view());
  layer.backward(store, dy.view(), x.view(), dx.view(), dp.view());
  expert_pass r{test::floats_of(out), test::floats_of(dx), test::floats_of(dp), {}};
  for (const auto& [key, id] : ids) {  // by (expert, linear)
    std::vector<float> g(std::size_t(store[id].numel));
    kernels::convert(tensor::view_of(std::span<float>(g)), store.grad(id));
    r.grads.insert(r.grads.end(), g.begin(), g.end());
  }
  return r;
}

}  // namespace

TEST_CASE("the grouped experts compute the loop's numbers bit for bit") {
  // At least two threads, so that the experts do run at once (on a one-core machine too).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(std::max(2, threads));
  const std::vector<std::vector<std::int64_t>> routings = {
      {40, 40, 40, 40, 40, 40, 40, 40},   // balanced
      {300, 20, 0, 35, 5, 0, 60, 20},     // skewed: expert 0 holds over half the rows, two experts empty
      {3, 1, 0, 2, 0, 0, 1, 1},           // a few rows
  };
  for (const auto& counts : routings)
    for (auto type : {tensor::dtype::float32, tensor::dtype::bfloat16})
      for (bool fp8 : {false, true}) {
        INFO("counts " << counts[0] << ", " << counts[1] << ", ...; " << (type == tensor::dtype::float32 ? "fp32" : "bf16")
                       << (fp8 ? " fp8" : ""));
        const auto loop = run(false, counts, type, fp8), grouped = run(true, counts, type, fp8);
        CHECK(grouped.out == loop.out);
        CHECK(grouped.dx == loop.dx);
        CHECK(grouped.dprobs == loop.dprobs);
        CHECK(grouped.grads == loop.grads);
      }
  omp_set_num_threads(threads);
}
