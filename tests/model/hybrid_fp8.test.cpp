// A hybrid Mamba model under fp8 (Megatron's mamba_stack_spec builds the mixer's in_proj and
// out_proj as Transformer Engine linears, so fp8_autocast runs their GEMMs in fp8): a model of
// Mamba layers only trains within 5% of fp32 under every recipe and format, its losses differ
// from fp32 (the mixer's GEMMs did round through fp8), and --first-last-layers-bf16 over every
// layer computes exactly as without fp8.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "model/gpt_model.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

model::gpt_model_config mamba_only(const std::string& pattern) {
  auto c = test::llama_style();
  c.swiglu = false, c.squared_relu = true;
  c.num_layers = int(pattern.size());
  c.hybrid_layers = pattern;
  c.hidden_size = 32, c.ffn_hidden_size = 64, c.seq_length = 16, c.max_position_embeddings = 16;
  c.position_embedding_type = model::position_embedding_kind::none;
  c.padded_vocab_size = 64, c.init_method_std = 0.05f, c.is_hybrid_model = true;
  // 16 heads of 4, 2 groups of state 4: in_proj's width 2 * 64 + 2 * 2 * 4 + 16 = 160, a
  // multiple of 16 as Megatron requires under fp8.
  c.mamba.state_dim = 4, c.mamba.head_dim = 4, c.mamba.num_groups = 2;
  return c;
}

}  // namespace

TEST_CASE("a hybrid model's Mamba layers run their projections in fp8 under every recipe and format") {
  const int steps = 8;
  const auto reference = test::sgd_losses(mamba_only("MM"), steps);
  REQUIRE(reference.back() < 0.9 * reference.front());
  using R = model::fp8_recipe;
  for (auto recipe : {R::delayed, R::tensorwise, R::mxfp8, R::blockwise})
    for (auto format : {model::fp8_format::e4m3, model::fp8_format::hybrid}) {
      auto c = mamba_only("MM");
      c.fp8.enabled = true, c.fp8.recipe = recipe, c.fp8.fp8 = format;
      c.fp8.fp8_amax_history_len = 4, c.fp8.amax_compute_algo = model::fp8_amax_compute_algo::max;
      const auto losses = test::sgd_losses(c, steps);
      INFO("recipe " << int(recipe) << " format " << int(format));
      CHECK(losses.back() < 0.9 * losses.front());
      double largest = 0, any = 0;
      for (int s = 0; s < steps; ++s) {
        largest = std::max(largest, std::fabs(losses[s] - reference[s]) / reference[s]);
        any += std::fabs(losses[s] - reference[s]);
      }
      CHECK(largest < 0.05);
      CHECK(any > 0);  // only the Mamba projections can have rounded through fp8
    }
}

TEST_CASE("a hybrid model's Mamba layers kept in bf16 by first-last-layers-bf16 run without fp8") {
  const auto reference = test::sgd_losses(mamba_only("M*M"), 3);
  auto c = mamba_only("M*M");
  c.fp8.enabled = true, c.fp8.recipe = model::fp8_recipe::tensorwise, c.fp8.first_last_layers_bf16 = true;
  c.fp8.num_layers_at_start_in_bf16 = 2, c.fp8.num_layers_at_end_in_bf16 = 1;  // all three layers
  CHECK(test::sgd_losses(c, 3) == reference);
  c.fp8.num_layers_at_start_in_bf16 = 0;  // the first Mamba layer in fp8
  CHECK(test::sgd_losses(c, 3) != reference);
}
