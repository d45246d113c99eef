// The rest of Megatron-Core's routing options against the PyTorch reference (moe_reference.py,
// float64): --moe-apply-probs-on-input, sinkhorn load balancing (Megatron's own sinkhorn lifted
// from the installed megatron-core) and --moe-input-jitter-eps (the drawn noise handed to the
// reference; its bounds, reproducibility and gradient by finite differences checked here).
#include <catch2/catch.hpp>

#include <map>

#include "tests/model/moe_reference_case.hpp"

namespace {

// Tokens per expert of the router's last forward.
std::vector<int> counts(const model::moe_router& r) {
  std::vector<int> n(std::size_t(r.num_experts()), 0);
  for (int e : r.top()) ++n[std::size_t(e)];
  return n;
}

// A fp64 layer's forward and backward with every input given; returns sum(out * dy), fills dx.
double fp64_objective(const model::gpt_model_config& base, const std::vector<double>& x, const std::vector<double>& dy,
                      int seq, int batch, std::vector<double>* dx = nullptr) {
  auto c = base;
  c.params_dtype = tensor::dtype::float64;
  model::single_group tp;
  model::parameter_store store(tensor::dtype::float64, tensor::dtype::float64);
  model::moe_layer layer(store, "decoder.layers.0.mlp", c);
  store.allocate(c.seed, 0, 1);
  std::vector<double> out(x.size(), 0.0), xs = x;
  layer.forward(store, tp, tensor::view_of(std::span<const double>(xs)), tensor::view_of(std::span<double>(out)), seq,
                batch, true, 11);
  if (dx) {
    dx->assign(x.size(), 0.0);
    store.zero_grad();
    layer.backward(store, tp, tensor::view_of(std::span<const double>(dy)), tensor::view_of(std::span<const double>(xs)),
                   tensor::view_of(std::span<double>(*dx)));
  }
  return test::dot(dy, out);
}

}  // namespace

TEST_CASE("MoE layer with --moe-apply-probs-on-input (top-1) matches PyTorch and differs from probs on the output") {
  moe_case k{mixtral_like()};
  k.config.moe.router_topk = 1, k.config.moe.router_pre_softmax = true;
  k.config.moe.apply_probs_on_input = true;
  compare(k, "probs_on_input");
  moe_case plain = k;
  plain.config.moe.apply_probs_on_input = false;
  const layer_run on(k), off(plain);
  // SwiGLU is not linear in its input: p * f(x) != f(p * x), so the flag changes the output.
  CHECK(test::relative_error(on.out, off.out) > 1e-3);
}

TEST_CASE("MoE layer with the list form aux_loss and seq_aux_loss (one coefficient each) matches PyTorch") {
  for (auto score : {model::moe_score_function::softmax, model::moe_score_function::sigmoid}) {
    moe_case k{mixtral_like()};
    k.config.moe.score_function = score;
    k.config.moe.load_balancing_list = {{model::moe_load_balancing::aux_loss, 0.1},
                                        {model::moe_load_balancing::seq_aux_loss, 0.03}};
    k.aux_scale = 0.5;
    INFO("sigmoid " << (score == model::moe_score_function::sigmoid));
    compare(k, score == model::moe_score_function::sigmoid ? "list_sigmoid" : "list_softmax");
    // Both losses are there, each what its type alone gives.
    const layer_run both(k);
    moe_case aux = k, seq = k;
    aux.config.moe.load_balancing_list.resize(1);
    seq.config.moe.load_balancing_list.erase(seq.config.moe.load_balancing_list.begin());
    const layer_run a(aux), s(seq);
    const auto& l = both.layer.router().aux_losses();
    CHECK(l.load_balancing_loss > 0);
    CHECK(l.seq_load_balancing_loss > 0);
    CHECK(l.load_balancing_loss == a.layer.router().aux_losses().load_balancing_loss);
    CHECK(l.seq_load_balancing_loss == s.layer.router().aux_losses().seq_load_balancing_loss);
    CHECK(a.layer.router().aux_losses().seq_load_balancing_loss == 0);
    CHECK(s.layer.router().aux_losses().load_balancing_loss == 0);
  }
}

TEST_CASE("MoE layer with sinkhorn load balancing matches PyTorch with Megatron's sinkhorn for top-1 and top-2") {
  for (int topk : {1, 2}) {
    for (bool training : {true, false}) {
      moe_case k{mixtral_like()};
      k.config.moe.load_balancing = model::moe_load_balancing::sinkhorn;
      k.config.moe.router_topk = topk, k.config.moe.aux_loss_coeff = 0;
      k.training = training;
      INFO("topk " << topk << " training " << training);
      compare(k, "sinkhorn_top" + std::to_string(topk) + (training ? "_train" : "_eval"));
    }
  }
}

TEST_CASE("sinkhorn routing spreads a skewed router's tokens in training and not in evaluation") {
  moe_case k{mixtral_like()};
  k.config.moe.load_balancing = model::moe_load_balancing::sinkhorn;
  k.config.moe.router_topk = 1, k.config.moe.aux_loss_coeff = 0, k.config.moe.z_loss_coeff.reset();
  k.seq = 16, k.batch = 2;
  auto skewed = [&](bool training) {
    k.training = training;
    layer_run run(k);
    // Expert 0's router row made large: plain top-1 sends nearly everything there.
    auto& store = run.store;
    for (auto& p : store.all())
      if (p.name == "decoder.layers.0.mlp.router.weight") {
        std::vector<float> w = test::copy_of<float>(p.value);
        for (int i = 0; i < k.config.hidden_size; ++i) w[std::size_t(i)] = 3.0f * std::abs(w[std::size_t(i)]) + 1.0f;
        kernels::copy(p.value, test::view(w));
      }
    std::vector<float> x(run.x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::abs(run.x[i]);  // positive: expert 0's logit dominates
    std::vector<float> out(x.size());
    run.layer.forward(store, run.tp, test::view(x), test::view(out), k.seq, k.batch, training);
    return counts(run.layer.router());
  };
  const auto eval = skewed(false), train = skewed(true);
  WARN("tokens per expert, evaluation " << eval[0] << " " << eval[1] << " " << eval[2] << " " << eval[3]
                                        << "; training " << train[0] << " " << train[1] << " " << train[2] << " " << train[3]);
  CHECK(eval[0] >= 28);  // of 32 tokens
  CHECK(*std::max_element(train.begin(), train.end()) <= 12);
  CHECK(*std::min_element(train.begin(), train.end()) >= 4);
}

TEST_CASE("MoE layer with --moe-input-jitter-eps matches PyTorch on the drawn noise in training and evaluation") {
  for (bool training : {true, false}) {
    moe_case k{mixtral_like()};
    k.config.moe.input_jitter_eps = 0.05;
    k.training = training;
    INFO("training " << training);
    compare(k, std::string("jitter_") + (training ? "train" : "eval"));
    // The noise is there in evaluation too (Megatron's apply_input_jitter ignores self.training).
    const layer_run run(k);
    const auto& j = run.layer.router().jitter();
    REQUIRE(j.size() == std::size_t(k.seq * k.batch * k.config.hidden_size));
    CHECK(*std::min_element(j.begin(), j.end()) >= 0.95);
    CHECK(*std::max_element(j.begin(), j.end()) <= 1.05);
    CHECK(*std::max_element(j.begin(), j.end()) - *std::min_element(j.begin(), j.end()) > 0.08);
    double mean = 0;
    for (double v : j) mean += v;
    CHECK(std::abs(mean / double(j.size()) - 1.0) < 0.01);
  }
}

TEST_CASE("the router's input jitter is reproducible from its stream and changes the logits") {
  moe_case k{mixtral_like()};
  k.config.moe.input_jitter_eps = 0.1;
  const layer_run a(k), b(k);
  CHECK(a.layer.router().jitter() == b.layer.router().jitter());
  CHECK(a.out == b.out);
  moe_case other = k;
  other.noise_stream = 8;
  const layer_run c(other);
  CHECK(a.layer.router().jitter() != c.layer.router().jitter());
  moe_case plain = k;
  plain.config.moe.input_jitter_eps.reset();
  const layer_run d(plain);
  CHECK(d.layer.router().jitter().empty());
  CHECK(test::relative_error(a.layer.router().logits(), d.layer.router().logits()) > 1e-3);
}

TEST_CASE("forced load balancing (--moe-router-force-load-balancing) routes by standard normal logits straight through as RandomSTE") {
  moe_case k{mixtral_like()};
  k.config.moe.force_load_balancing = true;
  compare(k, "force_load_balancing");  // the gradient: the random logits' one, into the gating GEMM
  // A router skewed towards expert 0 still spreads its tokens evenly: 256 choices over 4 experts.
  k.seq = 64, k.batch = 2;
  layer_run run(k);
  for (auto& p : run.store.all())
    if (p.name == "decoder.layers.0.mlp.router.weight") {
      std::vector<float> w = test::copy_of<float>(p.value);
      for (int i = 0; i < k.config.hidden_size; ++i) w[std::size_t(i)] = 50.0f;
      kernels::copy(p.value, test::view(w));
    }
  std::vector<float> out(run.x.size());
  run.layer.forward(run.store, run.tp, test::view(run.x), test::view(out), k.seq, k.batch, true, 3);
  const auto n = counts(run.layer.router());
  WARN("tokens per expert with forced balance: " << n[0] << " " << n[1] << " " << n[2] << " " << n[3]);
  for (int c : n) CHECK(std::abs(c - 64) <= 32);  // binomial sd 7: within 4.6 sd
  // The logits are standard normal draws, whatever the input: mean 0, variance 1.
  const auto& l = run.layer.router().logits();
  double mean = 0, sq = 0;
  for (double v : l) mean += v, sq += v * v;
  mean /= double(l.size()), sq /= double(l.size());
  WARN("random logits: mean " << mean << ", variance " << sq - mean * mean);
  CHECK(std::abs(mean) < 0.15);
  CHECK(std::abs(sq - mean * mean - 1.0) < 0.2);
  moe_case plain = k;
  plain.config.moe.force_load_balancing = false;
  layer_run skewed(plain);
  for (auto& p : skewed.store.all())
    if (p.name == "decoder.layers.0.mlp.router.weight") kernels::copy(p.value, run.param(p.name).value);
  std::vector<float> xs(run.x.size());
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::abs(run.x[i]);
  skewed.layer.forward(skewed.store, skewed.tp, test::view(xs), test::view(out), k.seq, k.batch, true, 3);
  CHECK(counts(skewed.layer.router())[0] == k.seq * k.batch);  // without the flag: every token to expert 0
}

TEST_CASE("the jittered router's input gradient matches finite differences given the drawn noise") {
  auto c = mixtral_like();
  c.moe.input_jitter_eps = 0.2, c.moe.aux_loss_coeff = 0.1, c.moe.z_loss_coeff.reset();
  const int seq = 3, batch = 2, n = seq * batch * c.hidden_size;
  auto x = test::random_vector(std::size_t(n), 41), dy = test::random_vector(std::size_t(n), 42);
  std::vector<double> dx;
  fp64_objective(c, x, dy, seq, batch, &dx);
  const auto numeric = test::numeric_gradient([&] { return fp64_objective(c, x, dy, seq, batch); }, x);
  // The aux loss's gradient is not part of sum(out * dy); without it the two must agree.
  c.moe.aux_loss_coeff = 0;
  std::vector<double> dx_main;
  fp64_objective(c, x, dy, seq, batch, &dx_main);
  const double err = test::relative_error(dx_main, numeric);
  WARN("jittered router: analytic vs finite-difference input gradient " << err);
  CHECK(err < 1e-7);
  CHECK(test::relative_error(dx, dx_main) > 1e-6);  // the aux loss did reach dx through the noise
}
