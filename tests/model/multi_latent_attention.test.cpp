// Multi-latent attention (--multi-latent-attention) in fp64 against tests/model/mla_reference.py,
// an independent PyTorch MLA written from the DeepSeek-V2 paper's equations (complex-number RoPE
// on interleaved pairs, YaRN as DeepSeek's reference code computes it): the output, the input
// gradient and every weight gradient, with and without a query latent, with and without the
// latent norms, RoPE and YaRN. (transformers 4.44 in .venv has no DeepSeek-V2/V3 model.)
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernels/convert.hpp"
#include "model/multi_latent_attention.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/layer_reference.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;
namespace fs = std::filesystem;

namespace {

constexpr int seq = 8, batch = 2;

model::gpt_model_config mla_config(int q_lora_rank, bool norms, bool yarn) {
  model::gpt_model_config c;
  c.num_layers = 2, c.hidden_size = 24, c.num_attention_heads = 4;
  c.seq_length = seq, c.max_position_embeddings = seq;
  c.params_dtype = c.grad_buffer_dtype = tensor::dtype::float64;
  c.add_bias_linear = false, c.init_method_std = 0.2f;
  c.normalization = model::normalization_kind::rms_norm;
  c.qk_layernorm = norms;
  c.rotary_base = 50;
  auto& m = c.mla;
  m.enabled = true, m.q_lora_rank = q_lora_rank, m.kv_lora_rank = 10;
  m.qk_head_dim = 6, m.qk_pos_emb_head_dim = 4, m.v_head_dim = 7;
  m.yarn = yarn;
  if (yarn) {  // a correction range inside the rotary dims, and every mscale term active
    m.rotary_scaling_factor = 4, m.mscale = 0.7, m.mscale_all_dim = 0.9;
    m.original_max_position_embeddings = 6, m.beta_fast = 2, m.beta_slow = 0.5;
  }
  return c;
}

void write_config(const fs::path& path, const model::gpt_model_config& c) {
  const auto& m = c.mla;
  std::ofstream o(path);
  o.precision(17);
  o << "hidden=" << c.hidden_size << "\nheads=" << c.num_attention_heads << "\nseq=" << seq << "\nbatch=" << batch
    << "\nq_lora_rank=" << m.q_lora_rank << "\nkv_lora_rank=" << m.kv_lora_rank << "\nqk_head_dim=" << m.qk_head_dim
    << "\nrope_dim=" << m.qk_pos_emb_head_dim << "\nv_head_dim=" << m.v_head_dim << "\nnorms=" << c.qk_layernorm
    << "\neps=" << c.norm_epsilon << "\nbase=" << c.rotary_base << "\nyarn=" << m.yarn
    << "\nfactor=" << m.rotary_scaling_factor << "\nmscale=" << m.mscale << "\nmscale_all_dim=" << m.mscale_all_dim
    << "\noriginal_max=" << m.original_max_position_embeddings << "\nbeta_fast=" << m.beta_fast
    << "\nbeta_slow=" << m.beta_slow << "\n";
}

using mla_run = test::layer_run;

mla_run run_ours(const model::gpt_model_config& c) {
  model::parameter_store store(tensor::dtype::float64, tensor::dtype::float64);
  model::multi_latent_attention mla(store, "attn", c, 0, 0, 1);
  store.allocate(7, 0, 1);
  mla_run r;
  for (auto& p : store.all()) {
    auto v = test::copy_of<double>(p.value);
    if (p.full_shape.size() == 1) {  // norm weights away from their init
      const auto noise = test::random_vector(v.size(), p.offset + 3, 0.3);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] += noise[i];
      kernels::convert(p.value, test::view(v));
    }
    r.names.push_back(p.name);
    r.params.push_back(v);
  }
  const std::size_t n = std::size_t(seq) * batch * c.hidden_size;
  r.x = test::random_vector(n, 11);
  r.dout = test::random_vector(n, 12);
  r.out.assign(n, 0), r.dx.assign(n, 0);
  model::single_group tp;
  mla.forward(store, tp, test::view(r.x), test::view(r.out), seq, batch, 0.0f, 0);
  mla.backward(store, tp, test::view(r.dout), test::view(r.x), test::view(r.dx));
  for (auto& p : store.all()) r.grads.push_back(test::copy_of<double>(p.grad));
  return r;
}

// The reference's out, dx and weight gradients for our run's weights and inputs.
mla_run run_reference(const model::gpt_model_config& c, const mla_run& ours, const std::string& tag) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/model/mla_reference" / tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_config(dir / "config.txt", c);
  return test::run_layer_reference(dir, "mla_reference.py", ours);
}

void compare(const model::gpt_model_config& c, const std::string& tag) {
  const auto ours = run_ours(c);
  const auto ref = run_reference(c, ours, tag);
  // fp64 throughout; the RoPE angles are float32 on both sides' own formulas (Megatron's).
  const double tol = 1e-6;
  double worst = test::relative_error(ours.out, ref.out);
  CHECK(test::relative_error(ours.out, ref.out) < tol);
  CHECK(test::relative_error(ours.dx, ref.dx) < tol);
  worst = std::max(worst, test::relative_error(ours.dx, ref.dx));
  for (std::size_t i = 0; i < ours.names.size(); ++i) {
    INFO(ours.names[i]);
    CHECK(test::relative_error(ours.grads[i], ref.grads[i]) < tol);
    worst = std::max(worst, test::relative_error(ours.grads[i], ref.grads[i]));
  }
  WARN(tag << ": " << ours.names.size() << " parameters, worst relative error against PyTorch " << worst);
}

}  // namespace

TEST_CASE("MLA with a query latent, latent norms and YaRN matches the PyTorch MLA", "[mla]") {
  compare(mla_config(12, true, true), "q_lora_norms_yarn");
}

TEST_CASE("MLA without a query latent (linear_q_proj), plain RoPE, matches PyTorch", "[mla]") {
  compare(mla_config(0, false, false), "q_proj_rope");
}

TEST_CASE("MLA with a query latent and no norms, and without a query latent with v wider than q and k, YaRN, matches PyTorch", "[mla]") {
  compare(mla_config(12, false, true), "q_lora_yarn");
  auto wide_v = mla_config(0, true, true);
  wide_v.mla.v_head_dim = 13;  // wider than the query/key heads (10): the keys are the padded ones
  compare(wide_v, "q_proj_norms_yarn_wide_v");
}

TEST_CASE("MLA: YaRN's scales change the result (the comparison can fail)", "[mla]") {
  const auto yarn = mla_config(12, true, true);
  auto no_mscale = yarn;
  no_mscale.mla.mscale_all_dim = 0;  // a different softmax scale and concentration factor
  const auto a = run_ours(yarn), b = run_ours(no_mscale);
  CHECK(test::relative_error(b.out, a.out) > 1e-3);
  auto plain = yarn;
  plain.mla.yarn = false;
  CHECK(test::relative_error(run_ours(plain).out, a.out) > 1e-3);
}
