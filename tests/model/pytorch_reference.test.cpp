// The float model's loss and every parameter gradient against an independent pure-PyTorch
// implementation (gpt_reference.py) of the same Megatron model, for a Llama-style and a
// GPT-2-style configuration: loss within 1e-5 relative, each gradient within 1e-4 relative L2.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/convert.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;
namespace fs = std::filesystem;

#include "tests/model/pytorch_compare.hpp"

using namespace mactor::test::pytorch_compare;


TEST_CASE("llama-style and gpt2-style models in bf16 and fp16 match PyTorch in that dtype") {
  auto llama = test::llama_style();
  llama.hidden_size = 32, llama.ffn_hidden_size = 48, llama.seq_length = 16;
  llama.max_position_embeddings = 16, llama.padded_vocab_size = 64, llama.init_method_std = 0.05f;
  compare_half_with_pytorch(llama, tensor::dtype::bfloat16, "llama_bf16");
  auto gpt2 = test::gpt2_style();
  gpt2.hidden_size = 32, gpt2.ffn_hidden_size = 64, gpt2.seq_length = 16;
  gpt2.max_position_embeddings = 20, gpt2.padded_vocab_size = 64, gpt2.init_method_std = 0.05f;
  compare_half_with_pytorch(gpt2, tensor::dtype::bfloat16, "gpt2_bf16");
  compare_half_with_pytorch(gpt2, tensor::dtype::float16, "gpt2_fp16");
}

// Which residual stream PyTorch runs must matter: our fp32-residual model sits closer, gradient by
// gradient on average, to the reference with an fp32 residual stream than to the bf16 one, and
// closer to it than our bf16-residual model does (the flag moves ours toward that reference). Our
// bf16-residual model's own preference is not asserted: its distance to the two references differs
// by less than what the fusions ours has and PyTorch's op-by-op run lacks (bias-dropout-add,
// attention scores kept in fp32) move it, 0.0065 against 0.0061 for the GPT-2 style model.
double mean_grad_error(our_run& run, const reference_run& ref) {
  double sum = 0;
  for (std::size_t i = 0; i < run.names.size(); ++i) {
    std::vector<double> got(run.params[i].size());
    kernels::convert(test::view(got), run.m.parameters()[i].grad);
    sum += test::relative_error(got, ref.grads[i]);
  }
  return sum / double(run.names.size());
}

TEST_CASE("with --fp32-residual-connection a bf16 model matches PyTorch with an fp32 residual stream") {
  for (auto c : {test::llama_style(), test::gpt2_style()}) {
    c.hidden_size = 32, c.ffn_hidden_size = 64, c.seq_length = 16, c.max_position_embeddings = 20;
    c.padded_vocab_size = 64, c.init_method_std = 0.05f, c.params_dtype = tensor::dtype::bfloat16;
    const std::string tag = c.swiglu ? "llama_bf16_fp32_residual" : "gpt2_bf16_fp32_residual";
    const fs::path root = fs::path(MACTOR_BINARY_DIR) / "tests/model/pytorch_reference" / tag;
    our_run plain(c);
    const auto torch_plain = run_reference(root / "plain", c, plain.names, plain.params, plain.batch,
                                           plain.scale, "bfloat16");
    c.fp32_residual_connection = true;
    our_run fp32_residual(c);
    REQUIRE(fp32_residual.params == plain.params);
    const auto torch_fp32_residual = run_reference(root / "fp32_residual", c, plain.names, plain.params,
                                                   plain.batch, plain.scale, "bfloat16");
    const double own = mean_grad_error(fp32_residual, torch_fp32_residual);
    const double other = mean_grad_error(fp32_residual, torch_plain);
    const double plain_own = mean_grad_error(plain, torch_plain);
    const double plain_other = mean_grad_error(plain, torch_fp32_residual);
    INFO(tag << ": mean gradient error of the fp32-residual model to PyTorch fp32-residual " << own
             << ", to PyTorch bf16-residual " << other << "; of the bf16-residual model " << plain_own
             << " and " << plain_other);
    CHECK(own < other);
    CHECK(own < plain_other);
    compare_half_with_pytorch(c, tensor::dtype::bfloat16, tag);  // within bf16's rounding
    WARN(tag << ": mean gradient error " << own << " to its own reference, " << other << " to the other");
  }
}

TEST_CASE("llama-style model (RMSNorm, RoPE, SwiGLU, GQA, untied, no bias) matches PyTorch") {
  auto c = test::llama_style();
  c.hidden_size = 32, c.ffn_hidden_size = 48, c.seq_length = 16, c.max_position_embeddings = 16;
  c.padded_vocab_size = 64, c.init_method_std = 0.05f;
  compare_with_pytorch(c, "llama");
}

TEST_CASE("gpt2-style model (LayerNorm, learned positions, GeLU, biases, tied) matches PyTorch") {
  auto c = test::gpt2_style();
  c.hidden_size = 32, c.ffn_hidden_size = 64, c.seq_length = 16, c.max_position_embeddings = 20;
  c.padded_vocab_size = 64, c.init_method_std = 0.05f;
  compare_with_pytorch(c, "gpt2");
  c.apply_layernorm_1p = true, c.gelu_tanh_approximation = true;
  compare_with_pytorch(c, "gpt2_1p_tanh");
}

TEST_CASE("a gpt2-style model with squared ReLU (--squared-relu) matches PyTorch, forward and backward") {
  auto c = test::gpt2_style();
  c.squared_relu = true;
  compare_with_pytorch(c, "gpt2_squared_relu");
  c.params_dtype = tensor::dtype::bfloat16;
  c.hidden_size = 32, c.ffn_hidden_size = 64, c.seq_length = 16, c.max_position_embeddings = 20;
  c.padded_vocab_size = 64, c.init_method_std = 0.05f;
  compare_half_with_pytorch(c, tensor::dtype::bfloat16, "gpt2_squared_relu_bf16");
}

// Attention and RoPE variants (--rotary-interleaved, --rotary-seq-len-interpolation-factor,
// --use-rope-scaling, --no-rope-freq, --window-size / --window-attn-skip-freq, --softmax-type):
// `variant` against PyTorch, loss and every gradient (the sink's included), as
// compare_with_pytorch; and the same model without the variant (`base`, same weights by name)
// must miss PyTorch's answer by more than those tolerances, so the check can fail.