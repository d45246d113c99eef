// The whole GPT model's parameter gradients against central finite differences, in double
// precision, for both model styles, with dropout on (masks are pinned by the dropout step).
#include "model/gpt_model.hpp"

#include <catch2/catch.hpp>

#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

void check_gradients(model::gpt_model_config c) {
  c.attention_dropout = 0.2f, c.hidden_dropout = 0.15f;
  model::single_group tp;
  model::gpt_model m(test::in_double(c), tp);
  const auto batch = test::make_batch(2, c.seq_length, c.padded_vocab_size, 3);
  const double scale = 0.37;
  m.set_dropout_step(4);
  m.forward_backward(batch.view(), scale);
  m.set_dropout_step(4);
  for (auto& p : m.parameters()) {
    std::vector<double> value = test::copy_of<double>(p.value);
    auto loss = [&] {
      std::copy(value.begin(), value.end(), p.value_as<double>());
      return scale * m.forward_only(batch.view(), true).loss_sum;
    };
    const auto numeric = test::numeric_gradient(loss, value, 1e-5);
    std::copy(value.begin(), value.end(), p.value_as<double>());
    const std::vector<double> analytic = test::copy_of<double>(p.grad);
    INFO(p.name);
    CHECK(test::relative_error(analytic, numeric) < 1e-6);
  }
}

}  // namespace

TEST_CASE("llama-style model gradients match finite differences") {
  check_gradients(test::llama_style());
}

TEST_CASE("gpt2-style model gradients match finite differences, with zero-centered gamma") {
  auto c = test::gpt2_style();
  c.apply_layernorm_1p = true;
  c.gelu_tanh_approximation = true;
  check_gradients(c);
}

TEST_CASE("loss is the masked sum of token losses and the count is the mask sum") {
  auto c = test::gpt2_style();
  model::single_group tp;
  model::gpt_model m(test::in_double(c), tp);
  auto batch = test::make_batch(2, c.seq_length, c.padded_vocab_size, 5);
  const auto full = m.forward_only(batch.view());
  double mask_sum = 0;
  for (float v : batch.loss_mask) mask_sum += v;
  CHECK(full.num_tokens == mask_sum);
  // Near-uniform predictions at init: the mean loss is close to log(vocab).
  CHECK(full.loss_sum / full.num_tokens == Approx(std::log(24.0)).epsilon(0.2));
  // Masking one more token removes exactly that token's loss.
  batch.loss_mask.assign(batch.loss_mask.size(), 0.0f);
  batch.loss_mask[0] = 1.0f;
  const auto one = m.forward_only(batch.view());
  CHECK(one.num_tokens == 1.0);
  CHECK(one.loss_sum > 0.0);
}

TEST_CASE("bad configs, out-of-range tokens, labels and positions are refused with the reason") {
  auto c = test::llama_style();
  c.num_query_groups = 3;
  model::single_group tp;
  CHECK_THROWS_WITH((model::gpt_model(c, tp)),
                    Catch::Contains("num_attention_heads=4 is not divisible by num_query_groups=3"));
  c = test::llama_style();
  model::gpt_model m(c, tp);
  auto batch = test::make_batch(1, c.seq_length, c.padded_vocab_size, 1);
  batch.tokens[2] = 99;
  CHECK_THROWS_WITH(m.forward_only(batch.view()), Catch::Contains("token id 99"));
  batch.tokens[2] = 1;
  batch.labels[3] = -1;
  CHECK_THROWS_WITH(m.forward_only(batch.view()), Catch::Contains("label -1"));
  auto g = test::gpt2_style();
  model::gpt_model learned(g, tp);
  auto b2 = test::make_batch(1, g.seq_length, g.padded_vocab_size, 1);
  std::vector<std::int32_t> positions(g.seq_length, g.max_position_embeddings);
  auto view = b2.view();
  view.position_ids = positions.data();
  CHECK_THROWS_WITH(learned.forward_only(view), Catch::Contains("position id 8"));
}
