// Megatron's --use-precision-aware-optimizer: Adam with its moments stored in bf16, fp16 or fp8
// as Transformer Engine's FusedAdam stores them, against torch.optim.AdamW whose moments are
// rounded the same way after every step (precision_adam_reference.py), and the state's size.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <random>

#include "model/lr_scheduler.hpp"
#include "model/optimizer_adam.hpp"
#include "model/optimizer_state.hpp"
#include "optimizer_python_reference.hpp"

using namespace mactor::model;
using mactor::test::run_python_reference;

namespace {

struct toy {
  std::vector<std::vector<float>> values, grads;
  std::vector<optim_param> params;

  toy() {
    const std::size_t sizes[] = {40, 8, 24, 16};
    std::mt19937 rng(77);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t n : sizes) {
      values.emplace_back(n);
      grads.emplace_back(n);
      for (float& v : values.back()) v = normal(rng);
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      optim_param p;
      p.name = "p" + std::to_string(i) + (i == 1 ? ".bias" : ".weight");
      p.value = values[i].data();
      p.grad = grads[i].data();
      p.numel = values[i].size();
      p.no_weight_decay = i == 1;
      params.push_back(p);
    }
  }
};

struct run_result {
  nlohmann::json job;
  std::vector<std::vector<std::vector<float>>> history;  // [step][param][element]
  std::vector<std::vector<float>> exp_avg, exp_avg_sq;   // unscaled, after the last step
  std::size_t state_bytes = 0;
};

constexpr int steps = 10;

run_result run_adam(state_dtype m, state_dtype v) {
  toy model;
  adam_options o{0.9, 0.95, 1e-8, true, m, v};
  adam_optimizer opt(model.params, make_param_groups(model.params, {1e-2, 1e-3, {}, {}, 0.1}), o);
  lr_scheduler_options s;
  s.max_lr = 1e-2, s.min_lr = 1e-3, s.lr_warmup_steps = 2, s.lr_decay_steps = steps;
  s.decay_style = lr_decay_style::cosine, s.start_wd = s.end_wd = 0.1;
  lr_scheduler sched(s, opt.param_groups());
  run_result r;
  r.job = {{"values", model.values}, {"beta1", 0.9}, {"beta2", 0.95}, {"eps", 1e-8},
           {"exp_avg_dtype", std::string(to_string(m))}, {"exp_avg_sq_dtype", std::string(to_string(v))}};
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : opt.param_groups()) groups.push_back({{"params", g.params}});
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int step = 0; step < steps; ++step) {
    // Mixed magnitudes: small moments are where 16- and 8-bit storage loses the most.
    for (auto& g : model.grads)
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = normal(rng) * (i % 3 == 0 ? 1e-3f : 1.0f);
    r.job["grads"].push_back(model.grads);
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      groups[gi]["lr"].push_back(opt.param_groups()[gi].lr);
      groups[gi]["weight_decay"].push_back(opt.param_groups()[gi].weight_decay);
    }
    opt.step();
    sched.step(1);
    r.history.push_back(model.values);
  }
  r.job["groups"] = groups;
  for (const auto& st : opt.state()) {
    r.exp_avg.emplace_back(st.exp_avg.size());
    r.exp_avg_sq.emplace_back(st.exp_avg_sq.size());
    st.exp_avg.unscale(r.exp_avg.back());
    st.exp_avg_sq.unscale(r.exp_avg_sq.back());
  }
  r.state_bytes = opt.state_bytes();
  return r;
}

double max_relative(const std::vector<float>& ours, const nlohmann::json& ref) {
  REQUIRE(ref.size() == ours.size());
  double worst = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const double r = ref[i].get<double>();
    worst = std::max(worst, std::abs(ours[i] - r) / std::max({std::abs(double(ours[i])), std::abs(r), 1e-6}));
  }
  return worst;
}

}  // namespace

TEST_CASE("Adam with bf16, fp16 and fp8 moments follows torch AdamW with TE FusedAdam's state rounding for 10 steps") {
  const run_result fp32 = run_adam(state_dtype::fp32, state_dtype::fp32);
  const std::pair<state_dtype, state_dtype> cases[] = {{state_dtype::bf16, state_dtype::bf16},
                                                       {state_dtype::fp16, state_dtype::fp16},
                                                       {state_dtype::fp8, state_dtype::fp8},
                                                       {state_dtype::bf16, state_dtype::fp32},
                                                       {state_dtype::fp8, state_dtype::bf16}};
  for (const auto& [m, v] : cases) {
    const run_result ours = run_adam(m, v);
    const auto ref = run_python_reference("precision_adam_reference.py", "run", ours.job);
    double params = 0, states = 0, from_fp32 = 0;
    for (int step = 0; step < steps; ++step)
      for (std::size_t p = 0; p < ours.history[step].size(); ++p) {
        params = std::max(params, max_relative(ours.history[step][p], ref["history"][step][p]));
        nlohmann::json fp32_values = fp32.history[step][p];
        from_fp32 = std::max(from_fp32, max_relative(ours.history[step][p], fp32_values));
      }
    for (std::size_t p = 0; p < ours.exp_avg.size(); ++p) {
      states = std::max(states, max_relative(ours.exp_avg[p], ref["state"][p]["exp_avg"]));
      states = std::max(states, max_relative(ours.exp_avg_sq[p], ref["state"][p]["exp_avg_sq"]));
    }
    std::printf("exp_avg %s, exp_avg_sq %s vs torch + TE rounding over %d steps: max rel diff params %.3g, "
                "moments %.3g; apart from fp32 moments by %.3g\n",
                std::string(to_string(m)).c_str(), std::string(to_string(v)).c_str(), steps, params, states, from_fp32);
    INFO(to_string(m) << " / " << to_string(v));
    CHECK(params < 1e-6);
    CHECK(states < 1e-6);
    // The storage really rounds: the run leaves the fp32-state run by far more than fp32 noise.
    CHECK(from_fp32 > 1e-5);
  }
}

TEST_CASE("state_bytes counts the moments in their storage dtype") {
  const std::size_t numel = 40 + 8 + 24 + 16;
  CHECK(run_adam(state_dtype::fp32, state_dtype::fp32).state_bytes == numel * 8);
  CHECK(run_adam(state_dtype::bf16, state_dtype::bf16).state_bytes == numel * 4);
  CHECK(run_adam(state_dtype::fp16, state_dtype::fp32).state_bytes == numel * 6);
  CHECK(run_adam(state_dtype::fp8, state_dtype::fp8).state_bytes == numel * 2);
}

TEST_CASE("fp8 E4M3 codes decode and encode back to themselves, and encoding rounds to nearest even") {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    if ((c & 0x7f) == 0x7f) {
      CHECK(std::isnan(from_e4m3(code)));
      continue;
    }
    INFO("code " << c);
    CHECK(to_e4m3(from_e4m3(code)) == code);
  }
  CHECK(from_e4m3(0x7e) == 448.0f);
  CHECK(to_e4m3(1000.0f) == 0x7e);            // saturated, not NaN
  CHECK(from_e4m3(to_e4m3(1.0625f)) == 1.0f);  // halfway between 1 and 1.125: to the even mantissa
  CHECK(from_e4m3(to_e4m3(1.1875f)) == 1.25f);
}

TEST_CASE("a state loaded from its unscaled fp32 values is the state saved (bf16 bit for bit)") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> x(64);
  for (float& v : x) v = normal(rng);
  for (state_dtype t : {state_dtype::bf16, state_dtype::fp16, state_dtype::fp8}) {
    scaled_state saved(t);
    saved.set(x);
    std::vector<float> unscaled(x.size()), again(x.size());
    saved.unscale(unscaled);
    scaled_state loaded(t);
    loaded.set(unscaled);  // what a checkpoint load does (Megatron's set_scaled_state)
    loaded.unscale(again);
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, double(std::abs(again[i] - unscaled[i])) / std::max(std::abs(unscaled[i]), 1e-30f));
    INFO(to_string(t));
    if (t == state_dtype::bf16) CHECK(again == unscaled);
    else CHECK(worst < 1e-3);  // the rescale may move a value by an ulp of its storage
  }
}
