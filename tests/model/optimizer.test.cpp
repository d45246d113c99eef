// Adam(W) and SGD-momentum steps against torch.optim run on the same numbers, and the param
// grouping rules (no weight decay on biases and norms, LR multipliers, decoupled LR).
#include "model/optimizer.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <random>

#include "model/lr_scheduler.hpp"
#include "model/optimizer_adam.hpp"
#include "model/optimizer_sgd.hpp"
#include "optimizer_python_reference.hpp"

using namespace mactor::model;
using mactor::test::run_python_reference;

namespace {

struct toy_model {
  std::vector<std::vector<float>> values, grads;
  std::vector<optim_param> params;

  toy_model() {
    struct spec { const char* name; std::size_t numel; bool no_wd; double lr_mult; bool decoupled; };
    const spec specs[] = {{"layer.weight", 24, false, 1.0, false},
                          {"layer.bias", 6, true, 1.0, false},
                          {"norm.weight", 6, true, 1.0, false},
                          {"head.weight", 12, false, 0.5, false},
                          {"embedding.weight", 10, false, 1.0, true}};
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const spec& s : specs) {
      values.emplace_back(s.numel);
      grads.emplace_back(s.numel);
      for (float& v : values.back()) v = normal(rng);
    }
    for (std::size_t i = 0; i < std::size(specs); ++i) {
      optim_param p;
      p.name = specs[i].name;
      p.value = values[i].data();
      p.grad = grads[i].data();
      p.numel = specs[i].numel;
      p.no_weight_decay = specs[i].no_wd;
      p.lr_mult = specs[i].lr_mult;
      p.decoupled_lr = specs[i].decoupled;
      params.push_back(p);
    }
  }

  // A new set of grads per step: mixed scales and a few exact zeros.
  void fill_grads(std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> pick(0, 9);
    for (auto& g : grads)
      for (float& x : g) x = pick(rng) == 0 ? 0.0f : normal(rng) * (pick(rng) < 5 ? 1e-3f : 2.0f);
  }

  nlohmann::json values_json() const { return values; }
};

lr_scheduler_options schedule() {
  lr_scheduler_options o;
  o.init_lr = 0.0;
  o.max_lr = 1e-2;
  o.min_lr = 1e-3;
  o.lr_warmup_steps = 3 * 4;
  o.lr_decay_steps = 10 * 4;
  o.decay_style = lr_decay_style::cosine;
  o.start_wd = 0.05;
  o.end_wd = 0.2;
  o.wd_incr_steps = 10 * 4;
  o.wd_incr_style = weight_decay_incr_style::linear;
  return o;
}

struct comparison {
  double max_abs = 0.0, max_rel = 0.0;
  void add(double ours, double ref) {
    const double abs_err = std::abs(ours - ref);
    max_abs = std::max(max_abs, abs_err);
    const double scale = std::max(std::abs(ours), std::abs(ref));
    if (scale > 0) max_rel = std::max(max_rel, abs_err / std::max(scale, 1e-6));
  }
  void add_all(const scaled_state& state, const nlohmann::json& ref) {
    std::vector<float> values(state.size());
    state.unscale(values);
    add_all(values, ref);
  }
  void add_all(const std::vector<float>& ours, const nlohmann::json& ref) {
    REQUIRE(ref.size() == ours.size());
    for (std::size_t i = 0; i < ours.size(); ++i) add(ours[i], ref[i].get<double>());
  }
};

// One optimizer run: ten steps of the C++ optimizer, recorded with everything torch needs to
// replay them (initial values, grads, and each group's lr and weight decay per step).
struct recorded_run {
  nlohmann::json job;
  std::vector<std::vector<std::vector<float>>> history;  // [step][param][element]
};

recorded_run record(const std::string& kind, toy_model& model, optimizer& opt, nlohmann::json job) {
  recorded_run run;
  job["mode"] = "optimizer";
  job["kind"] = kind;
  job["values"] = model.values_json();
  lr_scheduler sched(schedule(), opt.param_groups());
  nlohmann::json groups = nlohmann::json::array();
  for (const param_group& g : opt.param_groups()) groups.push_back({{"params", g.params}});
  std::mt19937 rng(99);
  for (int step = 0; step < 10; ++step) {
    model.fill_grads(rng);
    job["grads"].push_back(model.grads);
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      groups[gi]["lr"].push_back(opt.param_groups()[gi].lr);
      groups[gi]["weight_decay"].push_back(opt.param_groups()[gi].weight_decay);
    }
    opt.step();
    sched.step(4);
    run.history.push_back(model.values);
  }
  job["groups"] = groups;
  run.job = job;
  return run;
}

comparison compare(const recorded_run& run, const nlohmann::json& ref) {
  comparison cmp;
  for (std::size_t step = 0; step < run.history.size(); ++step)
    for (std::size_t p = 0; p < run.history[step].size(); ++p)
      cmp.add_all(run.history[step][p], ref["history"][step][p]);
  return cmp;
}

}  // namespace

TEST_CASE("params are grouped as Megatron-Core groups them, in first-appearance order") {
  toy_model model;
  param_group_defaults defaults{1e-3, 1e-5, 5e-3, std::nullopt, 0.1};
  const auto groups = make_param_groups(model.params, defaults);
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].params == std::vector<std::size_t>{0});
  CHECK(groups[1].params == std::vector<std::size_t>{1, 2});
  CHECK(groups[1].wd_mult == 0.0);
  CHECK(groups[2].lr_mult == 0.5);
  CHECK(groups[3].decoupled_lr);
  CHECK(groups[3].max_lr == 5e-3);
  CHECK(groups[3].min_lr == 1e-5);  // --decoupled-min-lr defaults to --min-lr
  CHECK(groups[0].max_lr == 1e-3);

  lr_scheduler_options o = schedule();
  o.max_lr = 1e-3;
  o.min_lr = 1e-5;
  auto mutable_groups = groups;
  lr_scheduler sched(o, mutable_groups);
  sched.step(40);  // past the decay: every group sits at its own min_lr times lr_mult
  CHECK(mutable_groups[2].lr == Approx(0.5e-5));
  CHECK(logged_learning_rate(mutable_groups) == Approx(0.5e-5));  // last non-decoupled group
  CHECK(logged_decoupled_learning_rate(mutable_groups) == Approx(1e-5));
}

TEST_CASE("a decoupled param without --decoupled-lr is refused by name") {
  toy_model model;
  CHECK_THROWS_WITH(make_param_groups(model.params, param_group_defaults{1e-3, 0, {}, {}, 0.0}),
                    Catch::Contains("embedding.weight") && Catch::Contains("--decoupled-lr"));
}

TEST_CASE("ten AdamW, Adam and SGD-momentum steps track torch.optim to 1e-6 relative") {
  optimizer_options o;
  o.lr = 1e-2;
  o.min_lr = 1e-3;
  o.decoupled_lr = 2e-2;
  o.adam_beta1 = 0.8;
  o.adam_beta2 = 0.95;
  o.adam_eps = 1e-6;
  toy_model adamw_model;
  auto adamw = make_optimizer(adamw_model.params, o);
  auto* adamw_state = dynamic_cast<adam_optimizer*>(adamw.get());
  REQUIRE(adamw_state != nullptr);
  const recorded_run adamw_run =
      record("adamw", adamw_model, *adamw, {{"beta1", 0.8}, {"beta2", 0.95}, {"eps", 1e-6}});

  toy_model adam_model;  // Adam with L2 weight decay (decoupled_weight_decay = false)
  param_group_defaults defaults{1e-2, 1e-3, 2e-2, std::nullopt, 0.0};
  adam_optimizer adam(adam_model.params, make_param_groups(adam_model.params, defaults),
                      adam_options{0.9, 0.999, 1e-8, false});
  const recorded_run adam_run =
      record("adam", adam_model, adam, {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}});

  toy_model sgd_model;
  o.optimizer = optimizer_kind::sgd;
  o.sgd_momentum = 0.85;
  auto sgd = make_optimizer(sgd_model.params, o);
  auto* sgd_state = dynamic_cast<sgd_optimizer*>(sgd.get());
  REQUIRE(sgd_state != nullptr);
  const recorded_run sgd_run = record("sgd", sgd_model, *sgd, {{"momentum", 0.85}});

  const nlohmann::json ref = run_python_reference(
      "optimizer_reference.py", "batch", {{"jobs", {adamw_run.job, adam_run.job, sgd_run.job}}});
  const char* names[] = {"AdamW", "Adam (L2)", "SGD momentum"};
  const recorded_run* runs[] = {&adamw_run, &adam_run, &sgd_run};
  for (int i = 0; i < 3; ++i) {
    const comparison cmp = compare(*runs[i], ref["results"][i]);
    std::printf("%s vs torch over 10 steps: max abs diff %.3g, max rel diff %.3g\n", names[i],
                cmp.max_abs, cmp.max_rel);
    INFO(names[i]);
    CHECK(cmp.max_rel < 1e-6);
  }
  // The state torch keeps is the state we keep.
  const nlohmann::json& adamw_ref_state = ref["results"][0]["state"];
  comparison state_cmp;
  for (std::size_t p = 0; p < adamw_model.params.size(); ++p) {
    CHECK(adamw_state->state()[p].step == 10);
    CHECK(adamw_ref_state[p]["step"].get<double>() == 10.0);
    state_cmp.add_all(adamw_state->state()[p].exp_avg, adamw_ref_state[p]["exp_avg"]);
    state_cmp.add_all(adamw_state->state()[p].exp_avg_sq, adamw_ref_state[p]["exp_avg_sq"]);
    state_cmp.add_all(sgd_state->state()[p].momentum_buffer,
                      ref["results"][2]["state"][p]["momentum_buffer"]);
  }
  std::printf("optimizer state vs torch: max rel diff %.3g\n", state_cmp.max_rel);
  CHECK(state_cmp.max_rel < 1e-6);
}

TEST_CASE("weight decay leaves flagged params alone and shrinks the others") {
  // Zero grads isolate the decay: AdamW's update is then exactly value *= (1 - lr * wd).
  toy_model model;
  optimizer_options o;
  o.lr = 0.1;
  o.decoupled_lr = 0.1;
  o.weight_decay = 0.5;
  auto opt = make_optimizer(model.params, o);
  for (param_group& g : opt->param_groups()) {
    g.lr = g.max_lr * g.lr_mult;
    g.weight_decay = o.weight_decay * g.wd_mult;
  }
  const auto before = model.values;
  opt->step();
  for (std::size_t i = 0; i < before[1].size(); ++i) CHECK(model.values[1][i] == before[1][i]);
  for (std::size_t i = 0; i < before[2].size(); ++i) CHECK(model.values[2][i] == before[2][i]);
  for (std::size_t i = 0; i < before[0].size(); ++i)
    CHECK(model.values[0][i] == Approx(before[0][i] * (1 - 0.1 * 0.5)).epsilon(1e-6));
  for (std::size_t i = 0; i < before[3].size(); ++i)  // lr_mult 0.5
    CHECK(model.values[3][i] == Approx(before[3][i] * (1 - 0.05 * 0.5)).epsilon(1e-6));
}

TEST_CASE("clip_and_step reports the grad norm before clipping and the zero count") {
  toy_model model;
  std::mt19937 rng(7);
  model.fill_grads(rng);
  const double norm_before = grad_norm(model.params);
  const double zeros = count_zeros_in_grads(model.params);
  optimizer_options o;
  o.lr = 1e-3;
  o.decoupled_lr = 1e-3;
  auto opt = make_optimizer(model.params, o);
  const auto result = clip_and_step(*opt, 0.5, true);
  REQUIRE(result.grad_norm.has_value());
  CHECK(*result.grad_norm == norm_before);
  CHECK(*result.num_zeros_in_grad == zeros);
  CHECK(grad_norm(model.params) == Approx(0.5).epsilon(1e-5));
  const auto without = clip_and_step(*opt, 0.0, false);
  CHECK_FALSE(without.grad_norm.has_value());
  CHECK_FALSE(without.num_zeros_in_grad.has_value());
}
