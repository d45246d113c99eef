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

namespace {

template <typename V>
void write_bin(const fs::path& path, const V* data, std::size_t n) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), n * sizeof(V));
}

std::vector<double> read_doubles(const fs::path& path, std::size_t n) {
  std::vector<double> v(n);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(double)));
  REQUIRE(in.gcount() == std::streamsize(n * sizeof(double)));
  return v;
}

// Megatron's command-line form of an int-or-list layer selector; empty when not given.
std::string megatron_text(const model::layer_frequency& f) {
  if (f.every > 0) return std::to_string(f.every);
  if (f.list.empty()) return "";
  std::string out = "[";
  for (std::size_t i = 0; i < f.list.size(); ++i) out += (i ? "," : "") + std::to_string(f.list[i]);
  return out + "]";
}

const char* softmax_name(model::softmax_kind k) {
  return k == model::softmax_kind::learnable ? "learnable" : k == model::softmax_kind::off_by_one ? "off-by-one" : "vanilla";
}

void write_attention_variants(std::ostream& o, const model::gpt_model_config& c) {
  o << "rotary_interleaved=" << c.rotary_interleaved
    << "\nrotary_seq_len_interpolation_factor=" << c.rotary_seq_len_interpolation_factor
    << "\nuse_rope_scaling=" << c.use_rope_scaling << "\nrope_scaling_factor=" << c.rope_scaling_factor
    << "\nno_rope_freq=" << megatron_text(c.no_rope_freq)
    << "\nwindow_attn_skip_freq=" << megatron_text(c.window_attn_skip_freq) << "\nwindow_size=";
  if (!c.window_size.empty()) o << c.window_size[0] << "," << c.window_size[1];
  o << "\nsoftmax_type=" << softmax_name(c.softmax_type) << "\n";
}

// --- GLU variants' config keys (quick_geglu, activation_func_clamp_value, glu_linear_offset) ---
std::string glu_variant_keys(const model::gpt_model_config& c) {
  std::ostringstream o;
  o.precision(9);
  o << "\nquick_geglu=" << c.quick_geglu << "\nglu_linear_offset=" << c.glu_linear_offset;
  if (c.activation_func_clamp_value) o << "\nactivation_func_clamp_value=" << *c.activation_func_clamp_value;
  return o.str();
}

void write_config(const fs::path& path, const model::gpt_model_config& c, int mb, float scale) {
  std::ofstream o(path);
  o << "num_layers=" << c.num_layers << "\nhidden_size=" << c.hidden_size
    << "\nffn_hidden_size=" << c.ffn_hidden_size
    << "\nnum_attention_heads=" << c.num_attention_heads
    << "\nnum_query_groups=" << c.query_groups() << "\nkv_channels=" << c.head_dim()
    << "\nseq_length=" << c.seq_length << "\nmax_position_embeddings=" << c.max_position_embeddings
    << "\npadded_vocab_size=" << c.padded_vocab_size << "\nmicro_batch_size=" << mb
    << "\nnorm_epsilon=" << c.norm_epsilon << "\nrotary_base=" << c.rotary_base
    << "\nrotary_percent=" << c.rotary_percent << "\ngrad_scale=" << scale
    << "\napply_layernorm_1p=" << c.apply_layernorm_1p << "\nswiglu=" << c.swiglu
    << "\ngelu_tanh_approximation=" << c.gelu_tanh_approximation
    << "\nadd_bias_linear=" << c.add_bias_linear
    << "\nuntie_embeddings_and_output_weights=" << c.untie_embeddings_and_output_weights
    << "\nfp32_residual_connection=" << c.fp32_residual_connection
    << "\nsquared_relu=" << c.squared_relu << glu_variant_keys(c)
    << "\nnormalization="
    << (c.normalization == model::normalization_kind::layer_norm ? "LayerNorm" : "RMSNorm")
    << "\nposition_embedding_type="
    << (c.position_embedding_type == model::position_embedding_kind::rope ? "rope"
                                                                           : "learned_absolute")
    << "\n";
  write_attention_variants(o, c);
}

std::string python() {
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "/usr/bin/python3";
}

// One PyTorch run of gpt_reference.py on `params` (fp32 values, in m's order), in `dtype`.
struct reference_run {
  double loss = 0;
  std::vector<std::vector<double>> grads;
};

reference_run run_reference(const fs::path& dir, const model::gpt_model_config& c,
                            const std::vector<std::string>& names,
                            const std::vector<std::vector<float>>& params,
                            const test::batch_data& batch, float scale, const std::string& dtype) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_config(dir / "config.txt", c, batch.micro_batch_size, scale);
  std::ofstream(dir / "config.txt", std::ios::app) << "dtype=" << dtype << "\n";
  std::ofstream list(dir / "params.txt");
  for (std::size_t i = 0; i < names.size(); ++i) {
    list << names[i] << "\n";
    write_bin(dir / ("param_" + std::to_string(i) + ".bin"), params[i].data(), params[i].size());
  }
  list.close();
  write_bin(dir / "tokens.bin", batch.tokens.data(), batch.tokens.size());
  write_bin(dir / "labels.bin", batch.labels.data(), batch.labels.size());
  write_bin(dir / "loss_mask.bin", batch.loss_mask.data(), batch.loss_mask.size());
  const std::string command = python() + " " + MACTOR_SOURCE_DIR +
                              "/tests/model/gpt_reference.py " + dir.string();
  REQUIRE(std::system(command.c_str()) == 0);
  reference_run r;
  r.loss = read_doubles(dir / "ref_loss.bin", 1)[0];
  for (std::size_t i = 0; i < names.size(); ++i)
    r.grads.push_back(read_doubles(dir / ("ref_grad_" + std::to_string(i) + ".bin"), params[i].size()));
  return r;
}

// Our model on one batch: train-like weights (norms moved away from their init, so their
// gradients are exercised), one forward and backward; the weights as fp32 for PyTorch.
struct our_run {
  model::single_group tp;
  model::gpt_model m;
  std::vector<std::string> names;
  std::vector<std::vector<float>> params;  // the (possibly 16-bit) values PyTorch must see
  test::batch_data batch;
  float scale = 0;
  model::loss_and_count loss;

  explicit our_run(const model::gpt_model_config& c) : m(c, tp), batch(test::make_batch(3, c.seq_length, c.padded_vocab_size, 9)) {
    for (auto& p : m.parameters()) {
      std::vector<float> v(p.numel);
      kernels::convert(test::view(v), p.value);
      if (p.full_shape.size() == 1) {
        const auto noise = test::random_vector(p.numel, p.offset + 1, 0.1);
        for (std::size_t i = 0; i < p.numel; ++i) v[i] += float(noise[i]);
        kernels::convert(p.value, test::view(v));
        kernels::convert(test::view(v), p.value);
      }
      names.push_back(p.name);
      params.push_back(std::move(v));
    }
    double tokens = 0;
    for (float v : batch.loss_mask) tokens += v;
    scale = float(1.0 / tokens);
    loss = m.forward_backward(batch.view(), scale);
  }
};

void compare_with_pytorch(model::gpt_model_config c, const std::string& tag) {
  our_run run(c);
  const auto ref = run_reference(fs::path(MACTOR_BINARY_DIR) / "tests/model/pytorch_reference" / tag, c, run.names,
                                 run.params, run.batch, run.scale, "float32");
  CHECK(std::abs(run.loss.loss_sum - ref.loss) / std::abs(ref.loss) <= 1e-5);
  for (std::size_t i = 0; i < run.names.size(); ++i) {
    INFO(run.names[i]);
    CHECK(test::relative_error(test::copy_of<float>(run.m.parameters()[i].grad), ref.grads[i]) <= 1e-4);
  }
}

// The model in a 16-bit dtype against PyTorch running the same weights in that dtype (norms and
// loss in fp32, as Megatron's Float16Module; PyTorch's CPU has no fp16 GEMM, so there the
// reference rounds fp32 GEMMs to fp16). Ours must sit within the dtype's rounding of PyTorch's
// half-precision run, and visibly away from PyTorch's fp32 run on the same 16-bit weights (an
// fp32 model agrees with that to 1e-4 and better): it computes in 16 bits, not in fp32 with
// 16-bit storage. Ours fuses more (bias-dropout-add, attention) and so rounds less often.
void compare_half_with_pytorch(model::gpt_model_config c, tensor::dtype dtype, const std::string& tag) {
  c.params_dtype = dtype;
  our_run run(c);
  const auto& names = run.names;
  const auto& params = run.params;
  const auto& batch = run.batch;
  const float scale = run.scale;
  const auto& ours = run.loss;
  auto& m = run.m;
  const fs::path root = fs::path(MACTOR_BINARY_DIR) / "tests/model/pytorch_reference" / tag;
  const std::string torch_dtype = dtype == tensor::dtype::bfloat16 ? "bfloat16" : "float16";
  const auto half = run_reference(root / torch_dtype, c, names, params, batch, scale, torch_dtype);
  const auto full = run_reference(root / "float32", c, names, params, batch, scale, "float32");

  // The dtype's machine epsilon (2^-8 for bf16's 7 mantissa bits, 2^-11 for fp16's 10) sets
  // every bound below.
  const double eps = dtype == tensor::dtype::bfloat16 ? 0x1.0p-8 : 0x1.0p-11;
  const double loss_to_half = std::abs(ours.loss_sum - half.loss) / std::abs(half.loss);
  const double loss_to_full = std::abs(ours.loss_sum - full.loss) / std::abs(full.loss);
  INFO("loss: ours " << ours.loss_sum << ", torch " << torch_dtype << " " << half.loss
                     << ", torch float32 " << full.loss);
  CHECK(loss_to_half <= eps);
  CHECK(loss_to_full > 1e-6);  // 16-bit rounding shows
  double worst = 0, sum_to_half = 0, sum_to_full = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::vector<double> got(params[i].size());
    kernels::convert(test::view(got), m.parameters()[i].grad);
    const double to_half = test::relative_error(got, half.grads[i]);
    const double to_full = test::relative_error(got, full.grads[i]);
    INFO(names[i] << ": relative error to torch " << torch_dtype << " " << to_half
                  << ", to torch float32 " << to_full);
    CHECK(to_half <= 12 * eps);
    worst = std::max(worst, to_half), sum_to_half += to_half, sum_to_full += to_full;
  }
  INFO("mean relative gradient error to torch " << torch_dtype << " " << sum_to_half / names.size()
                                                << ", to torch float32 " << sum_to_full / names.size());
  CHECK(sum_to_full / names.size() > eps / 8);
  WARN(tag << ": loss relative error to torch " << torch_dtype << " " << loss_to_half
           << " (to float32 " << loss_to_full << "), worst gradient " << worst);
}

}  // namespace

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

// Which residual stream PyTorch runs must matter: each of our models sits closer, gradient by
// gradient on average, to the reference with its own residual dtype than to the other one.
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
    CHECK(plain_own < plain_other);
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
    CHECK(rel <= 1e-4);
    worst_rel = std::max(worst_rel, rel), worst_abs = std::max(worst_abs, max_abs_diff(got, ref.grads[i]));
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
