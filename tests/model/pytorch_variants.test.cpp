// Attention, RoPE and GLU variants of the model (Megatron's --rotary-*, --use-rope-scaling,
// --no-rope-freq, --window-*, --softmax-type, --quick-geglu, --activation-func-clamp-value,
// --glu-linear-offset, --qk-layernorm, --qk-l2-norm) against the independent PyTorch model, loss and every gradient.
#include "tests/model/pytorch_compare.hpp"

using namespace mactor;
using namespace mactor::test::pytorch_compare;

namespace {

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

void compare_variant_with_pytorch(const model::gpt_model_config& variant,
                                  const model::gpt_model_config& base, const std::string& tag) {
  our_run run(variant);
  const auto ref = run_reference(fs::path(MACTOR_BINARY_DIR) / "tests/model/pytorch_reference" / tag,
                                 variant, run.names, run.params, run.batch, run.scale, "float32");
  const double loss_error = std::abs(run.loss.loss_sum - ref.loss) / std::abs(ref.loss);
  CHECK(loss_error <= 1e-5);
  double worst_abs = 0, worst_rel = 0;
  for (std::size_t i = 0; i < run.names.size(); ++i) {
    INFO(run.names[i]);
    std::vector<double> got(run.params[i].size());
    kernels::convert(test::view(got), run.m.parameters()[i].grad);
    const double rel = test::relative_error(got, ref.grads[i]);
    const std::vector<double> zeros(got.size(), 0.0);
    if (max_abs_diff(ref.grads[i], zeros) < 1e-6) {
      // Zero in exact arithmetic (a key norm's bias shifts every score of a query alike, which
      // the softmax ignores): both sides are rounding noise, compared absolutely.
      CHECK(max_abs_diff(got, ref.grads[i]) < 1e-6);
    } else {
      CHECK(rel <= 1e-4);
      worst_rel = std::max(worst_rel, rel);
    }
    worst_abs = std::max(worst_abs, max_abs_diff(got, ref.grads[i]));
  }
  WARN(tag << ": loss |ours - torch| " << std::abs(run.loss.loss_sum - ref.loss) << " (relative "
           << loss_error << "), gradients max |ours - torch| " << worst_abs << " (worst relative "
           << worst_rel << ")");
  // Without the variant: at least one of loss and gradients outside the tolerances above.
  our_run plain(base);
  double plain_miss = std::abs(plain.loss.loss_sum - ref.loss) / std::abs(ref.loss) / 1e-5;
  for (std::size_t i = 0; i < plain.names.size(); ++i)
    for (std::size_t j = 0; j < run.names.size(); ++j)
      if (plain.names[i] == run.names[j])
        plain_miss = std::max(plain_miss, test::relative_error(test::copy_of<float>(plain.m.parameters()[i].grad), ref.grads[j]) / 1e-4);
  INFO(tag << ": the model without the variant misses PyTorch by " << plain_miss << " tolerances");
  CHECK(plain_miss > 10);
}

model::gpt_model_config small_llama() {
  auto c = test::llama_style();
  c.hidden_size = 32, c.ffn_hidden_size = 48, c.seq_length = 16, c.max_position_embeddings = 16;
  c.padded_vocab_size = 64, c.init_method_std = 0.05f;
  return c;
}

}  // namespace

TEST_CASE("RoPE with --rotary-interleaved matches PyTorch, forward and backward") {
  const auto base = small_llama();  // rotary_percent 0.5: pass-through channels too
  auto c = base;
  c.rotary_interleaved = true;
  compare_variant_with_pytorch(c, base, "llama_rotary_interleaved");
}

TEST_CASE("RoPE with --rotary-seq-len-interpolation-factor matches PyTorch, forward and backward") {
  const auto base = small_llama();
  auto c = base;
  c.rotary_seq_len_interpolation_factor = 4;
  compare_variant_with_pytorch(c, base, "llama_rope_interpolation");
}

TEST_CASE("RoPE with --use-rope-scaling (Llama 3.1 frequencies) matches PyTorch, forward and backward") {
  // Full rotary channels and a base of 1e6 put the 4 frequencies in all three bands; 256 positions
  // turn the scaled low frequencies far enough to matter.
  auto base = small_llama();
  base.rotary_percent = 1.0f, base.rotary_base = 1e6, base.seq_length = 256, base.max_position_embeddings = 256;
  auto c = base;
  c.use_rope_scaling = true, c.rope_scaling_factor = 8;
  compare_variant_with_pytorch(c, base, "llama_rope_scaling");
}

TEST_CASE("per-layer RoPE skipping with --no-rope-freq (an int and a list) matches PyTorch, forward and backward") {
  auto base = small_llama();
  base.num_layers = 4;
  auto every = base;
  every.no_rope_freq.every = 2;  // layers 2 and 4 (1-based) skip RoPE
  compare_variant_with_pytorch(every, base, "llama_no_rope_every_2");
  auto list = base;
  list.no_rope_freq.list = {1, 0, 0, 1};
  compare_variant_with_pytorch(list, base, "llama_no_rope_list");
}

TEST_CASE("sliding-window attention with --window-size and --window-attn-skip-freq (an int and a list) matches PyTorch") {
  auto base = small_llama();
  base.num_layers = 3;
  auto all = base;
  all.window_size = {3, 0};
  compare_variant_with_pytorch(all, base, "llama_window");
  auto every = all;
  every.window_attn_skip_freq.every = 2;  // layer 2 (1-based) keeps full attention
  compare_variant_with_pytorch(every, all, "llama_window_skip_2");
  auto list = all;
  list.window_attn_skip_freq.list = {0, 1, 0};  // only layer 2 has the window
  compare_variant_with_pytorch(list, all, "llama_window_list");
}

TEST_CASE("attention softmax with --softmax-type off-by-one and learnable matches PyTorch, the sink's gradient included") {
  auto gpt2 = test::gpt2_style();
  gpt2.hidden_size = 32, gpt2.ffn_hidden_size = 64, gpt2.seq_length = 16, gpt2.max_position_embeddings = 20;
  gpt2.padded_vocab_size = 64, gpt2.init_method_std = 0.05f;
  auto off_by_one = gpt2;
  off_by_one.softmax_type = model::softmax_kind::off_by_one;
  compare_variant_with_pytorch(off_by_one, gpt2, "gpt2_softmax_off_by_one");
  const auto base = small_llama();
  auto learnable = base;  // grouped queries: each head its own sink
  learnable.softmax_type = model::softmax_kind::learnable;
  compare_variant_with_pytorch(learnable, base, "llama_softmax_learnable");
  compare_half_with_pytorch(learnable, tensor::dtype::bfloat16, "llama_softmax_learnable_bf16");
}

TEST_CASE("query and key norms of --qk-layernorm (RMSNorm with grouped queries, LayerNorm with biases) matches PyTorch, the norms' gradients included") {
  const auto base = small_llama();
  auto llama = base;
  llama.qk_layernorm = true;
  compare_variant_with_pytorch(llama, base, "llama_qk_layernorm");
  compare_half_with_pytorch(llama, tensor::dtype::bfloat16, "llama_qk_layernorm_bf16");
  auto gpt2 = test::gpt2_style();
  gpt2.hidden_size = 32, gpt2.ffn_hidden_size = 64, gpt2.seq_length = 16, gpt2.max_position_embeddings = 20;
  gpt2.padded_vocab_size = 64, gpt2.init_method_std = 0.05f;
  auto with_norms = gpt2;
  with_norms.qk_layernorm = true;
  compare_variant_with_pytorch(with_norms, gpt2, "gpt2_qk_layernorm");
}

TEST_CASE("query and key L2 norms of --qk-l2-norm (grouped queries, in place of --qk-layernorm's norms) match PyTorch, forward and backward") {
  // The reference writes L2Norm through the Euclidean norm; mactor runs it on RMSNorm's kernels.
  const auto base = small_llama();
  auto llama = base;
  llama.qk_l2_norm = true;
  compare_variant_with_pytorch(llama, base, "llama_qk_l2_norm");
  compare_half_with_pytorch(llama, tensor::dtype::bfloat16, "llama_qk_l2_norm_bf16");
  auto both = llama;  // Megatron's specs put L2Norm in the slots either way: no norm weights
  both.qk_layernorm = true;
  compare_variant_with_pytorch(both, base, "llama_qk_l2_norm_with_qk_layernorm");
  auto gpt2 = test::gpt2_style();  // LayerNorm model: the head norm is still L2Norm, not LayerNorm
  gpt2.hidden_size = 32, gpt2.ffn_hidden_size = 64, gpt2.seq_length = 16, gpt2.max_position_embeddings = 20;
  gpt2.padded_vocab_size = 64, gpt2.init_method_std = 0.05f;
  auto with_layernorm = gpt2;
  with_layernorm.qk_layernorm = true;
  auto with_l2 = gpt2;
  with_l2.qk_l2_norm = true;
  compare_variant_with_pytorch(with_l2, with_layernorm, "gpt2_qk_l2_norm");
}

// --- GLU variants: --quick-geglu, --activation-func-clamp-value, --glu-linear-offset ---------------
namespace {

// compare_with_pytorch's checks, plus the largest absolute differences, printed for the record.
// Returns PyTorch's loss.
double compare_glu_variant(const model::gpt_model_config& c, const std::string& tag) {
  our_run run(c);
  const auto ref = run_reference(fs::path(MACTOR_BINARY_DIR) / "tests/model/pytorch_reference" / tag, c,
                                 run.names, run.params, run.batch, run.scale, "float32");
  CHECK(std::abs(run.loss.loss_sum - ref.loss) / std::abs(ref.loss) <= 1e-5);
  double worst_abs = 0, worst_rel = 0;
  for (std::size_t i = 0; i < run.names.size(); ++i) {
    INFO(run.names[i]);
    const auto got = test::copy_of<float>(run.m.parameters()[i].grad);
    const double rel = test::relative_error(got, ref.grads[i]);
    CHECK(rel <= 1e-4);
    worst_rel = std::max(worst_rel, rel);
    for (std::size_t j = 0; j < got.size(); ++j) worst_abs = std::max(worst_abs, std::abs(got[j] - ref.grads[i][j]));
  }
  WARN(tag << ": loss " << run.loss.loss_sum << " vs PyTorch " << ref.loss << " (|diff| "
           << std::abs(run.loss.loss_sum - ref.loss) << "), max |grad diff| " << worst_abs
           << ", worst relative L2 " << worst_rel);
  return ref.loss;
}

model::gpt_model_config small(model::gpt_model_config c) {
  c.hidden_size = 32, c.ffn_hidden_size = 64, c.seq_length = 16, c.max_position_embeddings = 20;
  c.padded_vocab_size = 64;
  return c;
}

}  // namespace

TEST_CASE("a gpt2-style model with quick GeGLU (--quick-geglu) matches PyTorch, forward and backward") {
  auto c = test::gpt2_style();
  c.quick_geglu = true;
  const double plain = compare_glu_variant(c, "gpt2_quick_geglu");
  c.swiglu = true, c.quick_geglu = false;  // the gate's activation matters
  CHECK(std::abs(compare_glu_variant(c, "gpt2_swiglu") - plain) > 1e-3 * std::abs(plain));
  c = small(test::gpt2_style());
  c.quick_geglu = true, c.init_method_std = 0.05f;
  compare_half_with_pytorch(c, tensor::dtype::bfloat16, "gpt2_quick_geglu_bf16");
}

TEST_CASE("quick GeGLU with a clamp value and a linear offset (gpt-oss's MLP) matches PyTorch") {
  auto c = test::gpt2_style();
  c.quick_geglu = true;
  const double plain = compare_glu_variant(c, "gpt2_quick_geglu_reference");
  // fc1's outputs have a std near 0.8 here: a clamp of 0.5 cuts a good share of both halves.
  c.activation_func_clamp_value = 0.5f;
  const double clamped = compare_glu_variant(c, "gpt2_quick_geglu_clamp");
  CHECK(std::abs(clamped - plain) > 1e-3 * std::abs(plain));
  c.activation_func_clamp_value.reset(), c.glu_linear_offset = 1.0f;
  const double offset = compare_glu_variant(c, "gpt2_quick_geglu_offset");
  CHECK(std::abs(offset - plain) > 1e-3 * std::abs(plain));
  c.activation_func_clamp_value = 0.5f;
  compare_glu_variant(c, "gpt2_quick_geglu_clamp_offset");
}

TEST_CASE("unfused SwiGLU with a clamp value and a linear offset matches PyTorch") {
  auto c = test::llama_style();
  c.activation_func_clamp_value = 0.3f, c.glu_linear_offset = -0.5f;
  compare_glu_variant(c, "llama_swiglu_clamp_offset");
}

