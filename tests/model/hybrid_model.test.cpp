// A hybrid Mamba model (MambaModel with Megatron's mamba_stack_spec: Mamba, attention-only and
// MLP-only layers, TE-fused norm names, decoder.final_norm) against the independent PyTorch model
// of gpt_reference.py + hybrid_reference.py + mamba_reference.py on the same weights: the
// parameter names must be Megatron's, the loss within 1e-5 relative, each gradient within 1e-4.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "model/gpt_chunk.hpp"
#include "model/group.hpp"
#include "tests/model/model_fixtures.hpp"
#include "tests/model/pytorch_compare.hpp"

using namespace mactor;
using namespace mactor::test::pytorch_compare;

namespace {

model::gpt_model_config nemotron_h_style(const std::string& pattern) {
  auto c = test::llama_style();  // RMSNorm, SwiGLU-free below, no bias, untied
  c.swiglu = false, c.squared_relu = true;  // Nemotron-H's MLP
  c.num_layers = int(pattern.size());
  c.hybrid_layers = pattern;
  c.hidden_size = 16, c.ffn_hidden_size = 32, c.seq_length = 12, c.max_position_embeddings = 12;
  c.position_embedding_type = model::position_embedding_kind::none;
  c.padded_vocab_size = 40, c.init_method_std = 0.1f, c.is_hybrid_model = true;
  c.mamba.state_dim = 4, c.mamba.head_dim = 8, c.mamba.num_groups = 2;  // 2 * 16 / 8 = 4 heads
  return c;
}

}  // namespace

TEST_CASE("a hybrid Mamba model M*-M (RMSNorm and no position embedding and untied) matches PyTorch") {
  compare_with_pytorch(nemotron_h_style("M*-M"), "hybrid_rmsnorm");
}

TEST_CASE("a hybrid model with LayerNorm and biases and learned positions and tied embeddings and set Mamba heads matches PyTorch") {
  auto c = nemotron_h_style("-M*M");
  c.normalization = model::normalization_kind::layer_norm;
  c.add_bias_linear = true, c.untie_embeddings_and_output_weights = false;
  c.position_embedding_type = model::position_embedding_kind::learned_absolute;
  c.mamba.num_heads = 6, c.mamba.num_groups = 3;
  compare_with_pytorch(c, "hybrid_layernorm");
}

TEST_CASE("a hybrid model with RoPE in its attention layers matches PyTorch") {
  auto c = nemotron_h_style("*M");
  c.position_embedding_type = model::position_embedding_kind::rope;
  compare_with_pytorch(c, "hybrid_rope");
}

TEST_CASE("a hybrid model refuses what its layers do not build") {
  auto c = nemotron_h_style("M*");
  model::single_group tp;
  c.hybrid_layers = "M*-";
  CHECK_THROWS_AS(model::gpt_chunk(c, tp, {0, 2, true, true}), std::invalid_argument);
  c.hybrid_layers = "ME";
  CHECK_THROWS_AS(model::gpt_chunk(c, tp, {0, 2, true, true}), std::invalid_argument);
  c.hybrid_layers = "M*";
  c.mamba.num_groups = 3;  // 4 heads
  CHECK_THROWS_AS(model::gpt_chunk(c, tp, {0, 2, true, true}), std::invalid_argument);
}
