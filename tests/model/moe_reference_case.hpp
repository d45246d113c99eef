// The MoE layer test harness: a moe_case (config, shape, training) run through mactor's layer and
// the PyTorch reference (tests/model/moe_reference.py, float64), compared within a tolerance.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <functional>

#include "kernels/convert.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/moe_layer.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;
namespace fs = std::filesystem;

namespace {

struct moe_case {
  model::gpt_model_config config;
  int seq = 6, batch = 2;
  double aux_scale = 1.0;
  bool training = true;
  std::vector<float> expert_bias{};  // with config.moe.enable_expert_bias: the router's bias
  std::uint64_t noise_stream = 7;    // the router's input-jitter stream
};

model::gpt_model_config mixtral_like() {
  model::gpt_model_config c;
  c.num_layers = 2, c.hidden_size = 12, c.ffn_hidden_size = 20;
  c.swiglu = true, c.add_bias_linear = false, c.init_method_std = 0.3f, c.seed = 5;
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 10;
  c.moe.aux_loss_coeff = 1e-2, c.moe.z_loss_coeff = 1e-3;
  return c;
}

std::string activation_name(const model::gpt_model_config& c) {
  return c.swiglu ? "swiglu" : c.gelu_tanh_approximation ? "gelu_tanh" : "gelu";
}

const char* balancing_name(model::moe_load_balancing b) {
  return b == model::moe_load_balancing::aux_loss ? "aux_loss"
         : b == model::moe_load_balancing::seq_aux_loss ? "seq_aux_loss"
         : b == model::moe_load_balancing::sinkhorn     ? "sinkhorn" : "none";
}

void write_floats(const fs::path& path, tensor::const_tensor_view v) {
  const auto f = test::copy_of<float>(v);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
}

std::vector<double> read_doubles(const fs::path& path, std::size_t n) {
  std::vector<double> v(n);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(double)));
  REQUIRE(in.gcount() == std::streamsize(n * sizeof(double)));
  return v;
}

std::string python() {
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "/usr/bin/python3";
}

void write_config(const fs::path& path, const moe_case& k) {
  const auto& c = k.config;
  const auto& m = c.moe;
  std::ofstream o(path);
  o.precision(17);
  o << "experts=" << m.num_experts << "\ntopk=" << m.router_topk << "\nhidden=" << c.hidden_size
    << "\nffn=" << m.ffn_hidden_size << "\nseq=" << k.seq << "\nbatch=" << k.batch
    << "\nactivation=" << activation_name(c) << "\npre_softmax=" << m.router_pre_softmax << "\nscaling=";
  if (m.router_topk_scaling_factor) o << *m.router_topk_scaling_factor;
  o << "\nbalancing=" << balancing_name(m.load_balancing) << "\naux_coeff=" << m.aux_loss_coeff << "\nz_coeff=";
  if (m.z_loss_coeff) o << *m.z_loss_coeff;
  o << "\nscore_function=" << (m.score_function == model::moe_score_function::sigmoid ? "sigmoid" : "softmax")
    << "\ncapacity=" << (m.expert_capacity_factor ? std::to_string(*m.expert_capacity_factor) : std::string())
    << "\ndrop_policy=" << (m.drop_by_position ? "position" : "probs")
    << "\nshared=" << m.shared_expert_intermediate_size << "\nnum_groups=" << m.router_num_groups << "\ngroup_topk=" << m.router_group_topk;
  o << "\nper_token=" << m.per_token_loss << "\naux_scale=" << k.aux_scale << "\ntraining=" << k.training << "\n";
  if (m.enable_expert_bias) o << "expert_bias=1\nbias_rate=" << m.bias_update_rate << "\n";
  if (m.apply_probs_on_input) o << "probs_on_input=1\n";
  if (!m.load_balancing_list.empty()) {
    o << "list=";
    for (std::size_t i = 0; i < m.load_balancing_list.size(); ++i)
      o << (i ? "," : "") << balancing_name(m.load_balancing_list[i].first) << ":" << m.load_balancing_list[i].second;
    o << "\n";
  }
  if (m.input_jitter_eps) o << "jitter=1\n";
  if (m.force_load_balancing) o << "random_logits=1\n";
}

struct layer_run {
  model::single_group tp;
  model::parameter_store store;
  model::moe_layer layer;
  std::vector<float> x, dy, out, dx;

  /// With `weights`, every parameter's value is taken from it, matched by name through `rename`.
  explicit layer_run(const moe_case& k, const layer_run* weights = nullptr,
                     const std::function<std::string(const std::string&)>& rename = {})
      : layer(store, "decoder.layers.0.mlp", k.config) {
    store.allocate(k.config.seed, 0, 1);
    if (k.config.moe.enable_expert_bias) layer.router().expert_bias() = k.expert_bias;
    if (weights)
      for (auto& p : store.all()) kernels::copy(p.value, weights->param(rename(p.name)).value);
    const int rows = k.seq * k.batch, h = k.config.hidden_size;
    for (auto v : test::random_vector(std::size_t(rows) * h, 21)) x.push_back(float(v));
    for (auto v : test::random_vector(std::size_t(rows) * h, 22)) dy.push_back(float(v));
    out.assign(x.size(), 0.f), dx.assign(x.size(), 0.f);
    layer.set_aux_loss_scale(k.aux_scale);
    layer.forward(store, tp, test::view(x), test::view(out), k.seq, k.batch, k.training, k.noise_stream);
    store.zero_grad();
    layer.backward(store, tp, test::view(dy), test::view(x), test::view(dx));
  }
  const model::parameter& param(const std::string& name) const {
    for (auto& p : store.all())
      if (p.name == name) return p;
    FAIL("no parameter " << name);
    return store.all()[0];
  }
};

std::string expert_weight(const moe_case& k, int e, int fc) {
  const std::string base = "decoder.layers.0.mlp.experts.";
  const std::string linear = "linear_fc" + std::to_string(fc);
  return k.config.moe.grouped_gemm ? base + linear + ".weight" + std::to_string(e)
                                   : base + "local_experts." + std::to_string(e) + "." + linear + ".weight";
}

// Runs both and checks everything within `tol` (relative L2); returns the reference's router
// weight gradient.
[[maybe_unused]] std::vector<double> compare(const moe_case& k, const std::string& tag, double tol = 1e-5) {
  layer_run run(k);
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/model/moe_reference" / tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_config(dir / "config.txt", k);
  write_floats(dir / "x.bin", test::view(run.x));
  write_floats(dir / "dy.bin", test::view(run.dy));
  write_floats(dir / "router.bin", run.param("decoder.layers.0.mlp.router.weight").value);
  const int E = k.config.moe.num_experts;
  for (int e = 0; e < E; ++e) {
    write_floats(dir / ("fc1_" + std::to_string(e) + ".bin"), run.param(expert_weight(k, e, 1)).value);
    write_floats(dir / ("fc2_" + std::to_string(e) + ".bin"), run.param(expert_weight(k, e, 2)).value);
  }
  if (k.config.moe.shared_expert_intermediate_size > 0)
    for (int fc : {1, 2}) {
      const auto& p = run.param("decoder.layers.0.mlp.shared_experts.linear_fc" + std::to_string(fc) + ".weight");
      write_floats(dir / ("shared_fc" + std::to_string(fc) + ".bin"), p.value);
    }
  if (k.config.moe.enable_expert_bias) write_floats(dir / "bias.bin", tensor::view_of(std::span<const float>(k.expert_bias)));
  if (k.config.moe.force_load_balancing) {  // the drawn logits (fp32 values, widened)
    const auto& l = run.layer.router().logits();
    std::ofstream(dir / "random_logits.bin", std::ios::binary).write(reinterpret_cast<const char*>(l.data()), std::streamsize(l.size() * sizeof(double)));
  }
  if (k.config.moe.input_jitter_eps) {  // the drawn noise, exactly as the router multiplied it in
    const auto& j = run.layer.router().jitter();
    std::ofstream(dir / "jitter.bin", std::ios::binary).write(reinterpret_cast<const char*>(j.data()), std::streamsize(j.size() * sizeof(double)));
  }
  const std::string command = python() + " " + MACTOR_SOURCE_DIR + "/tests/model/moe_reference.py " + dir.string();
  REQUIRE(std::system(command.c_str()) == 0);

  const std::size_t rows = std::size_t(k.seq) * k.batch, h = k.config.hidden_size;
  CHECK(test::relative_error(run.out, read_doubles(dir / "ref_out.bin", rows * h)) <= tol);
  CHECK(test::relative_error(run.dx, read_doubles(dir / "ref_dx.bin", rows * h)) <= tol);
  // Routing probabilities as a dense [rows, experts] map.
  std::vector<double> dense(rows * E, 0.0);
  const auto& r = run.layer.router();
  for (std::size_t t = 0; t < rows; ++t)
    for (int j = 0; j < r.topk(); ++j)
      if (r.kept()[t * r.topk() + j]) dense[t * E + r.top()[t * r.topk() + j]] = r.probs()[t * r.topk() + j];
  CHECK(test::relative_error(dense, read_doubles(dir / "ref_routing_probs.bin", rows * E)) <= tol);
  const auto losses = read_doubles(dir / "ref_losses.bin", 3);
  const auto& got = r.aux_losses();
  CHECK(std::abs(got.load_balancing_loss - losses[0]) <= tol * std::max(1.0, std::abs(losses[0])));
  CHECK(std::abs(got.seq_load_balancing_loss - losses[1]) <= tol * std::max(1.0, std::abs(losses[1])));
  CHECK(std::abs(got.z_loss - losses[2]) <= tol * std::max(1.0, std::abs(losses[2])));
  const auto router_ref = read_doubles(dir / "ref_drouter.bin", std::size_t(E) * h);
  CHECK(test::relative_error(test::copy_of<float>(run.param("decoder.layers.0.mlp.router.weight").grad), router_ref) <= tol);
  for (int e = 0; e < E; ++e)
    for (int fc : {1, 2}) {
      const auto& p = run.param(expert_weight(k, e, fc));
      INFO(p.name);
      const auto ref = read_doubles(dir / ("ref_dfc" + std::to_string(fc) + "_" + std::to_string(e) + ".bin"), p.numel);
      CHECK(test::relative_error(test::copy_of<float>(p.grad), ref) <= tol);
    }
  if (k.config.moe.shared_expert_intermediate_size > 0)
    for (int fc : {1, 2}) {
      const auto& p = run.param("decoder.layers.0.mlp.shared_experts.linear_fc" + std::to_string(fc) + ".weight");
      INFO(p.name);
      const auto ref = read_doubles(dir / ("ref_dshared_fc" + std::to_string(fc) + ".bin"), p.numel);
      CHECK(test::relative_error(test::copy_of<float>(p.grad), ref) <= tol);
    }
  if (k.config.moe.enable_expert_bias) {
    // The kept tokens per expert and the bias they move, as Megatron's update computes them.
    auto& router = run.layer.router();
    router.count_routed_tokens();
    const auto counts = router.routed_tokens();
    CHECK(counts == read_doubles(dir / "ref_tokens_per_expert.bin", std::size_t(E)));
    router.update_expert_bias(counts);
    std::vector<double> bias(router.expert_bias().begin(), router.expert_bias().end());
    CHECK(test::relative_error(bias, read_doubles(dir / "ref_updated_bias.bin", std::size_t(E))) <= 1e-6);
    CHECK(std::all_of(router.routed_tokens().begin(), router.routed_tokens().end(), [](double v) { return v == 0; }));
  }
  WARN(tag << ": load_balancing " << got.load_balancing_loss << " (torch " << losses[0] << "), seq "
           << got.seq_load_balancing_loss << " (" << losses[1] << "), z " << got.z_loss << " (" << losses[2] << ")");
  return router_ref;
}

}  // namespace
