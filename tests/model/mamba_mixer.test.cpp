// The Mamba-2 mixer against tests/model/mamba_reference.py, an independent PyTorch mixer (the
// Mamba-2 paper's minimal SSD with a different chunk length, torch's Conv1d, the gated norm
// written out) on the same weights: the output, the input gradient and every parameter gradient,
// in fp64 and fp32, with a sequence length that is not a multiple of either chunk length.
#include "model/mamba_mixer.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernels/convert.hpp"
#include "model/activation.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/layer_reference.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;
namespace fs = std::filesystem;

namespace {

constexpr int seq = 11, batch = 2;

using mixer_run = test::layer_run;

// Values as the store's dtype holds them (fp32 rounding included), handed back as doubles.
std::vector<double> through(tensor::dtype type, std::vector<double> v) {
  std::vector<double> rounded(v.size());
  tensor::tensor t;
  auto typed = model::ensure_activation(t, std::int64_t(v.size()), 1, type);
  kernels::convert(typed, test::view(v)), kernels::convert(test::view(rounded), typed);
  return rounded;
}

mixer_run run_ours(const model::mamba_mixer_config& c, tensor::dtype type) {
  const auto grads = type == tensor::dtype::float64 ? type : tensor::dtype::float32;
  model::parameter_store store(type, grads);
  model::mamba_mixer mixer(store, "mixer", c, 1);
  store.allocate(5, 0, 1);
  mixer.initialize(store, 5);
  mixer_run r;
  for (auto& p : store.all()) {
    std::vector<double> v(p.value.numel());
    kernels::convert(test::view(v), p.value);
    if (p.name.ends_with(".D") || p.name.ends_with("norm.weight")) {  // away from their ones
      const auto noise = test::random_vector(v.size(), p.offset + 3, 0.3);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] += noise[i];
      v = through(type, v);
      kernels::convert(p.value, test::view(v));
    }
    r.names.push_back(p.name), r.params.push_back(v);
  }
  const std::size_t n = std::size_t(seq) * batch * c.hidden_size;
  r.x = through(type, test::random_vector(n, 11)), r.dout = through(type, test::random_vector(n, 12));
  tensor::tensor xt, doutt, outt, dxt;
  const std::int64_t rows = std::int64_t(seq) * batch;
  auto x = model::ensure_activation(xt, rows, c.hidden_size, type);
  auto dout = model::ensure_activation(doutt, rows, c.hidden_size, type);
  auto out = model::ensure_activation(outt, rows, c.hidden_size, type);
  auto dx = model::ensure_activation(dxt, rows, c.hidden_size, type);
  kernels::convert(x, test::view(r.x)), kernels::convert(dout, test::view(r.dout));
  model::single_group tp;
  mixer.forward(store, tp, x, out, seq, batch);
  mixer.backward(store, tp, dout, x, dx);
  r.out.resize(n), r.dx.resize(n);
  kernels::convert(test::view(r.out), out), kernels::convert(test::view(r.dx), dx);
  for (auto& p : store.all()) {
    std::vector<double> g(p.grad.numel());
    kernels::convert(test::view(g), p.grad);
    r.grads.push_back(g);
  }
  return r;
}

mixer_run run_reference(const model::mamba_mixer_config& c, const mixer_run& ours,
                        const std::string& tag, int ref_block) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/model/mamba_reference" / tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream cfg(dir / "config.txt");
  cfg.precision(17);
  cfg << "seq=" << seq << "\nbatch=" << batch << "\nhidden=" << c.hidden_size
      << "\nheads=" << c.heads() << "\nhead_dim=" << c.head_dim << "\ngroups=" << c.num_groups
      << "\nstate=" << c.state_dim << "\nconv_width=" << c.conv_width << "\neps=" << c.norm_epsilon
      << "\nref_block=" << ref_block << "\n";
  cfg.close();
  auto ref = test::run_layer_reference(dir, "mamba_reference.py", ours);
  fs::remove_all(dir);
  return ref;
}

void compare(const model::mamba_mixer_config& c, tensor::dtype type, int ref_block,
             const std::string& tag, double tol) {
  const auto ours = run_ours(c, type);
  const auto ref = run_reference(c, ours, tag, ref_block);
  double worst = std::max(test::relative_error(ours.out, ref.out),
                          test::relative_error(ours.dx, ref.dx));
  CHECK(test::relative_error(ours.out, ref.out) < tol);
  CHECK(test::relative_error(ours.dx, ref.dx) < tol);
  for (std::size_t i = 0; i < ours.names.size(); ++i) {
    INFO(ours.names[i]);
    CHECK(test::relative_error(ours.grads[i], ref.grads[i]) < tol);
    worst = std::max(worst, test::relative_error(ours.grads[i], ref.grads[i]));
  }
  WARN(tag << ": worst relative L2 error " << worst);
}

model::mamba_mixer_config small_mixer(int groups, int chunk) {
  model::mamba_mixer_config c;
  c.hidden_size = 16, c.state_dim = 5, c.head_dim = 3, c.num_heads = 4, c.num_groups = groups;
  c.chunk_size = chunk, c.init_method_std = 0.3, c.num_layers = 2;
  return c;
}

}  // namespace

TEST_CASE("mamba mixer forward and backward match an independent PyTorch mixer in fp64") {
  compare(small_mixer(2, 4), tensor::dtype::float64, 8, "fp64_two_groups", 1e-10);
  compare(small_mixer(1, 16), tensor::dtype::float64, 3, "fp64_one_group", 1e-10);
}

TEST_CASE("mamba mixer in fp32 matches the fp64 PyTorch mixer on its fp32 weights") {
  compare(small_mixer(2, 5), tensor::dtype::float32, 4, "fp32_two_groups", 1e-5);
}

TEST_CASE("mamba mixer in bf16 (fp32 gradients) stays within bf16 rounding of the PyTorch mixer") {
  compare(small_mixer(2, 4), tensor::dtype::bfloat16, 8, "bf16_two_groups", 3e-2);
}

TEST_CASE("mamba mixer initializes A_log, dt_bias, D and the conv as Megatron draws them") {
  auto c = small_mixer(2, 4);
  c.num_heads = 64, c.num_groups = 2;
  model::parameter_store store(tensor::dtype::float64, tensor::dtype::float64);
  model::mamba_mixer mixer(store, "mixer", c, 1);
  store.allocate(1, 0, 1);
  mixer.initialize(store, 1);
  for (auto& p : store.all()) {
    const auto v = test::copy_of<double>(p.value);
    INFO(p.name);
    for (double e : v) {
      if (p.name.ends_with("A_log")) CHECK((e >= 0 && e <= std::log(16.0)));
      if (p.name.ends_with("dt_bias")) {  // softplus(dt_bias) in [0.001, 0.1]
        const double dt = std::log1p(std::exp(e));
        CHECK((dt >= 0.001 - 1e-12 && dt <= 0.1 + 1e-12));
      }
      if (p.name.ends_with(".D") || p.name.ends_with("norm.weight")) CHECK(e == 1.0);
      if (p.name.find("conv1d") != std::string::npos) CHECK(std::abs(e) <= 0.5);
    }
  }
  const auto named = [&](const std::string& name) {
    for (auto& p : store.all())
      if (p.name == name) return test::copy_of<double>(p.value);
    FAIL("no parameter " << name);
    return std::vector<double>{};
  };
  const auto A_log = named("mixer.A_log");  // spread over log(1) .. log(16), not one value
  CHECK(*std::max_element(A_log.begin(), A_log.end()) > *std::min_element(A_log.begin(), A_log.end()) + 1);
}
