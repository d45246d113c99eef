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
#include "tests/model/fp8_training_check.hpp"
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
  // Only the Mamba projections can round through fp8 in a model of Mamba layers.
  test::check_fp8_trains_close_to_fp32(mamba_only("MM"), 8);
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
