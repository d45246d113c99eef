// Shared by the PyTorch comparison tests: writing a model config, its parameters and batches
// for tests/model/gpt_reference.py, running it, and comparing the loss and every gradient.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/convert.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

namespace mactor::test::pytorch_compare {

namespace fs = std::filesystem;
using namespace mactor;


template <typename V>
inline void write_bin(const fs::path& path, const V* data, std::size_t n) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), n * sizeof(V));
}

inline std::vector<double> read_doubles(const fs::path& path, std::size_t n) {
  std::vector<double> v(n);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(double)));
  REQUIRE(in.gcount() == std::streamsize(n * sizeof(double)));
  return v;
}

// Megatron's command-line form of an int-or-list layer selector; empty when not given.
inline std::string megatron_text(const model::layer_frequency& f) {
  if (f.every > 0) return std::to_string(f.every);
  if (f.list.empty()) return "";
  std::string out = "[";
  for (std::size_t i = 0; i < f.list.size(); ++i) out += (i ? "," : "") + std::to_string(f.list[i]);
  return out + "]";
}

inline const char* softmax_name(model::softmax_kind k) {
  return k == model::softmax_kind::learnable ? "learnable" : k == model::softmax_kind::off_by_one ? "off-by-one" : "vanilla";
}

inline void write_attention_variants(std::ostream& o, const model::gpt_model_config& c) {
  o << "rotary_interleaved=" << c.rotary_interleaved
    << "\nrotary_seq_len_interpolation_factor=" << c.rotary_seq_len_interpolation_factor
    << "\nuse_rope_scaling=" << c.use_rope_scaling << "\nrope_scaling_factor=" << c.rope_scaling_factor
    << "\nno_rope_freq=" << megatron_text(c.no_rope_freq)
    << "\nwindow_attn_skip_freq=" << megatron_text(c.window_attn_skip_freq) << "\nwindow_size=";
  if (!c.window_size.empty()) o << c.window_size[0] << "," << c.window_size[1];
  o << "\nsoftmax_type=" << softmax_name(c.softmax_type) << "\nqk_layernorm=" << c.qk_layernorm
    << "\nqk_l2_norm=" << c.qk_l2_norm << "\n";
}

// --- GLU variants' config keys (quick_geglu, activation_func_clamp_value, glu_linear_offset) ---
inline std::string glu_variant_keys(const model::gpt_model_config& c) {
  std::ostringstream o;
  o.precision(9);
  o << "\nquick_geglu=" << c.quick_geglu << "\nglu_linear_offset=" << c.glu_linear_offset;
  if (c.activation_func_clamp_value) o << "\nactivation_func_clamp_value=" << *c.activation_func_clamp_value;
  return o.str();
}

inline void write_config(const fs::path& path, const model::gpt_model_config& c, int mb, float scale) {
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
    << (c.position_embedding_type == model::position_embedding_kind::rope   ? "rope"
        : c.position_embedding_type == model::position_embedding_kind::none ? "none"
                                                                             : "learned_absolute")
    << "\n";
  if (c.hybrid())
    o << "hybrid_layers=" << c.hybrid_layers << "\nmamba_state=" << c.mamba.state_dim
      << "\nmamba_head_dim=" << c.mamba.head_dim << "\nmamba_groups=" << c.mamba.num_groups
      << "\nmamba_heads=" << c.mamba.num_heads << "\n";
  write_attention_variants(o, c);
}

inline std::string python() {
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "/usr/bin/python3";
}

// One PyTorch run of gpt_reference.py on `params` (fp32 values, in m's order), in `dtype`.
struct reference_run {
  double loss = 0;
  std::vector<std::vector<double>> grads;
};

inline reference_run run_reference(const fs::path& dir, const model::gpt_model_config& c,
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

  /// mtp_per_token: the MTP depths' losses as sums scaled like the LM loss (--calculate-per-token-loss).
  explicit our_run(const model::gpt_model_config& c, bool mtp_per_token = false)
      : m(c, tp), batch(test::make_batch(3, c.seq_length, c.padded_vocab_size, 9)) {
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
    if (mtp_per_token) m.set_mtp_loss_scale(scale, true);
    loss = m.forward_backward(batch.view(), scale);
  }
};

inline void compare_with_pytorch(model::gpt_model_config c, const std::string& tag) {
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
inline void compare_half_with_pytorch(model::gpt_model_config c, tensor::dtype dtype, const std::string& tag) {
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


}  // namespace mactor::test::pytorch_compare
