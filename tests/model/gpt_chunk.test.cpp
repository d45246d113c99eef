// Pipeline chunks against the whole model: the same loss and the same gradients when the model is
// cut into stages and several micro-batches are in flight (out-of-order backward recomputes).
#include "model/gpt_chunk.hpp"

#include <catch2/catch.hpp>
#include <map>

#include "model/gpt_model.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

std::map<std::string, std::vector<double>> grads_by_name(std::vector<model::parameter>& ps) {
  std::map<std::string, std::vector<double>> out;
  for (auto& p : ps) out[p.name] = test::copy_of<double>(p.grad);
  return out;
}

void check_three_stages(model::gpt_model_config c) {
  c.num_layers = 3;
  c.attention_dropout = 0.2f, c.hidden_dropout = 0.15f;
  model::single_group tp;
  c = test::in_double(c);
  model::gpt_model whole(c, tp);
  const int micro_batches = 3;
  std::vector<test::batch_data> batches;
  for (int i = 0; i < micro_batches; ++i) batches.push_back(test::make_batch(2, c.seq_length, c.padded_vocab_size, 11 + i));
  double whole_loss = 0;
  for (int i = 0; i < micro_batches; ++i) {
    whole.set_dropout_step(100 + i);
    whole_loss += whole.forward_backward(batches[i].view(), 0.25).loss_sum;
  }

  model::gpt_chunk first(c, tp, {0, 1, true, false});
  model::gpt_chunk middle(c, tp, {1, 2, false, false});
  model::gpt_chunk last(c, tp, {2, 3, false, true});
  const std::size_t n = first.activation_numel(2);
  std::vector<std::vector<double>> a(micro_batches, std::vector<double>(n)), b = a;
  double chunk_loss = 0;
  // Every forward first (GPipe order), then backwards: the first two stages must recompute.
  for (int i = 0; i < micro_batches; ++i) {
    first.forward(i, batches[i].view(), {}, test::view(a[i]), true, true, 0.25, 100 + i);
    middle.forward(i, batches[i].view(), test::view(a[i]), test::view(b[i]), true, true, 0.25, 100 + i);
    chunk_loss += last.forward(i, batches[i].view(), test::view(b[i]), {}, true, true, 0.25, 100 + i).loss_sum;
  }
  CHECK(first.slots_in_flight() == micro_batches);
  std::vector<double> g1(n), g2(n);
  for (int i = 0; i < micro_batches; ++i) {
    last.backward(i, {}, test::view(g2));
    middle.backward(i, test::view(g2), test::view(g1));
    first.backward(i, test::view(g1), {});
  }
  CHECK(first.slots_in_flight() == 0);
  CHECK(chunk_loss == Approx(whole_loss).epsilon(1e-12));

  auto expected = grads_by_name(whole.parameters());
  std::map<std::string, std::vector<double>> got;
  for (auto* chunk : {&first, &middle, &last})
    for (auto& [name, g] : grads_by_name(chunk->parameters())) {
      auto& sum = got[name];
      if (sum.empty()) sum.assign(g.size(), 0.0);
      for (std::size_t i = 0; i < g.size(); ++i) sum[i] += g[i];  // the tied embedding's two copies add up
    }
  REQUIRE(got.size() == expected.size());
  for (auto& [name, g] : expected) {
    INFO(name);
    REQUIRE(got.count(name));
    CHECK(test::relative_error(got[name], g) < 1e-10);
  }
}

}  // namespace

TEST_CASE("three pipeline chunks with micro-batches in flight give the whole model's loss and gradients (gpt2 style, tied)") {
  check_three_stages(test::gpt2_style());
}

TEST_CASE("three pipeline chunks with micro-batches in flight give the whole model's loss and gradients (llama style, untied)") {
  check_three_stages(test::llama_style());
}

TEST_CASE("a chunk refuses a layer range outside the model and a backward without a kept forward") {
  auto c = test::gpt2_style();
  model::single_group tp;
  CHECK_THROWS_WITH((model::gpt_chunk(c, tp, {1, c.num_layers + 1, false, true})),
                    Catch::Contains("are not inside the model's"));
  model::gpt_chunk last(c, tp, {0, c.num_layers, true, true});
  CHECK_THROWS_WITH(last.backward(3, {}, {}), Catch::Contains("without a kept forward"));
}
