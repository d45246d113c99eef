// The LR / weight-decay schedule against megatron-core's own OptimizerParamScheduler (run by
// lr_scheduler_reference.py): every decay style, warmup by iters / samples / fraction, WSD
// styles, weight-decay increments, per-group bounds and multipliers, resume, and the checks.
#include "model/lr_scheduler.hpp"

#include <catch2/catch.hpp>

#include <cstdio>

#include "optimizer_python_reference.hpp"

using namespace mactor::model;
using mactor::test::run_python_reference;
using nlohmann::json;

namespace {

template <class T>
void read(const json& a, const char* key, T& out) {
  if (a.contains(key) && !a[key].is_null()) out = a[key].get<T>();
}
template <class T>
void read(const json& a, const char* key, std::optional<T>& out) {
  if (a.contains(key) && !a[key].is_null()) out = a[key].get<T>();
}

lr_schedule_args args_from_json(const json& a) {
  lr_schedule_args r;
  read(a, "train_iters", r.train_iters);
  read(a, "train_samples", r.train_samples);
  read(a, "global_batch_size", r.global_batch_size);
  read(a, "lr", r.lr);
  read(a, "min_lr", r.min_lr);
  read(a, "lr_warmup_init", r.lr_warmup_init);
  read(a, "lr_warmup_fraction", r.lr_warmup_fraction);
  read(a, "lr_warmup_iters", r.lr_warmup_iters);
  read(a, "lr_warmup_samples", r.lr_warmup_samples);
  read(a, "lr_decay_iters", r.lr_decay_iters);
  read(a, "lr_decay_samples", r.lr_decay_samples);
  read(a, "lr_decay_style", r.lr_decay_style);
  read(a, "lr_wsd_decay_iters", r.lr_wsd_decay_iters);
  read(a, "lr_wsd_decay_samples", r.lr_wsd_decay_samples);
  read(a, "lr_wsd_decay_style", r.lr_wsd_decay_style);
  read(a, "weight_decay", r.weight_decay);
  read(a, "start_weight_decay", r.start_weight_decay);
  read(a, "end_weight_decay", r.end_weight_decay);
  read(a, "weight_decay_incr_style", r.weight_decay_incr_style);
  read(a, "use_checkpoint_opt_param_scheduler", r.use_checkpoint_opt_param_scheduler);
  read(a, "override_opt_param_scheduler", r.override_opt_param_scheduler);
  return r;
}

// Four groups as Megatron builds them: plain, no weight decay, lr_mult 0.5, decoupled LR.
json groups_for(double lr, double min_lr) {
  return json::array({{{"max_lr", lr}, {"min_lr", min_lr}, {"lr_mult", 1.0}, {"wd_mult", 1.0}},
                      {{"max_lr", lr}, {"min_lr", min_lr}, {"lr_mult", 1.0}, {"wd_mult", 0.0}},
                      {{"max_lr", lr}, {"min_lr", min_lr}, {"lr_mult", 0.5}, {"wd_mult", 1.0}},
                      {{"max_lr", 2 * lr}, {"min_lr", min_lr / 2}, {"lr_mult", 1.0},
                       {"wd_mult", 1.0}}});
}

std::vector<param_group> to_groups(const json& groups) {
  std::vector<param_group> out;
  for (const json& g : groups) {
    param_group p;
    p.max_lr = g["max_lr"];
    p.min_lr = g["min_lr"];
    p.lr_mult = g["lr_mult"];
    p.wd_mult = g["wd_mult"];
    out.push_back(p);
  }
  return out;
}

// Runs a case the way the reference does; returns the same JSON shape.
json run_case(const json& c) {
  json out = {{"num_steps", json::array()}, {"lr", json::array()}, {"wd", json::array()}};
  std::vector<param_group> groups = to_groups(c["groups"]);
  auto snapshot = [&](const lr_scheduler& s) {
    out["num_steps"].push_back(s.num_steps());
    json lr = json::array(), wd = json::array();
    for (const param_group& g : groups) {
      lr.push_back(g.lr);
      wd.push_back(g.weight_decay);
    }
    out["lr"].push_back(lr);
    out["wd"].push_back(wd);
  };
  const std::vector<std::int64_t> increments = c["increments"];
  const std::size_t stop = c.contains("resume") ? c["resume"]["after"].get<std::size_t>()
                                                : increments.size();
  lr_scheduler sched(lr_scheduler_options_from_args(args_from_json(c["args"])), groups);
  snapshot(sched);
  for (std::size_t i = 0; i < stop; ++i) {
    sched.step(increments[i]);
    snapshot(sched);
  }
  if (c.contains("resume")) {
    const lr_scheduler_state saved = sched.state();
    groups = to_groups(c["groups"]);
    lr_scheduler resumed(lr_scheduler_options_from_args(args_from_json(c["resume"]["args"])),
                         groups);
    resumed.load_state(saved);
    snapshot(resumed);
    for (std::size_t i = stop; i < increments.size(); ++i) {
      resumed.step(increments[i]);
      snapshot(resumed);
    }
  }
  return out;
}

json iteration_case(json args, int steps) {
  const double lr = args.value("lr", 1e-3), min_lr = args.value("min_lr", 0.0);
  args["global_batch_size"] = args.value("global_batch_size", 8);
  return {{"args", args},
          {"groups", groups_for(lr, min_lr)},
          {"increments", std::vector<int>(steps, args["global_batch_size"].get<int>())}};
}

// Batch-size ramp-up: the scheduler steps by the current global batch.
json sample_case(json args) {
  const double lr = args.value("lr", 1e-3), min_lr = args.value("min_lr", 0.0);
  args["global_batch_size"] = 16;
  std::vector<int> increments;
  for (int b : {2, 2, 4, 4, 8, 8, 8, 16})
    increments.push_back(b);
  while (increments.size() < 60) increments.push_back(16);
  return {{"args", args}, {"groups", groups_for(lr, min_lr)}, {"increments", increments}};
}

json good_cases() {
  const json base = {{"train_iters", 50}, {"lr", 1e-3}, {"min_lr", 1e-5}};
  auto with = [&](json extra) {
    json a = base;
    a.update(extra);
    return a;
  };
  json cases = json::array();
  for (const char* style : {"linear", "cosine", "constant", "inverse-square-root"}) {
    cases.push_back(iteration_case(with({{"lr_decay_style", style}, {"lr_warmup_iters", 5}}), 60));
    cases.push_back(iteration_case(with({{"lr_decay_style", style}}), 60));  // no warmup
  }
  // Fractional warmup (0.037 * 320 samples = 11.84) from a non-zero start, decay past training.
  cases.push_back(iteration_case(with({{"lr_decay_style", "cosine"}, {"lr_warmup_fraction", 0.037},
                                       {"lr_warmup_init", 1e-4}, {"lr_decay_iters", 40}}), 60));
  cases.push_back(iteration_case(with({{"lr_decay_style", "linear"}, {"lr_decay_iters", 80},
                                       {"lr_warmup_iters", 3}}), 60));
  for (const char* wsd : {"linear", "cosine", "exponential", "minus_sqrt"})
    cases.push_back(iteration_case(with({{"lr_decay_style", "WSD"}, {"lr_wsd_decay_style", wsd},
                                         {"lr_wsd_decay_iters", 15}, {"lr_warmup_iters", 4}}),
                                   60));
  for (const char* wd : {"linear", "cosine"})
    cases.push_back(iteration_case(with({{"weight_decay_incr_style", wd},
                                         {"start_weight_decay", 0.01},
                                         {"end_weight_decay", 0.1}}), 60));
  cases.push_back(iteration_case(with({{"weight_decay", 0.05}}), 10));  // constant from --weight-decay
  // Sample-based, each warmup form, and WSD in samples.
  const json samples = {{"train_samples", 800}, {"lr", 3e-4}, {"min_lr", 3e-5}};
  auto swith = [&](json extra) {
    json a = samples;
    a.update(extra);
    return a;
  };
  cases.push_back(sample_case(swith({{"lr_decay_style", "cosine"}, {"lr_warmup_samples", 100}})));
  cases.push_back(sample_case(swith({{"lr_decay_style", "linear"}, {"lr_warmup_fraction", 0.1},
                                     {"lr_decay_samples", 600}})));
  cases.push_back(sample_case(swith({{"lr_decay_style", "WSD"}, {"lr_wsd_decay_style", "cosine"},
                                     {"lr_wsd_decay_samples", 250}, {"lr_warmup_samples", 50},
                                     {"weight_decay_incr_style", "cosine"},
                                     {"start_weight_decay", 0.0}, {"end_weight_decay", 0.2}})));
  cases.push_back(sample_case(swith({{"lr_decay_style", "inverse-square-root"},
                                     {"lr_warmup_samples", 37}})));
  // Resume: the checkpoint's values win with --use-checkpoint-opt-param-scheduler, and the
  // groups keep the old weight decay until the next step.
  json resume = iteration_case(with({{"lr_decay_style", "cosine"}, {"lr_warmup_iters", 5},
                                     {"weight_decay_incr_style", "linear"},
                                     {"start_weight_decay", 0.01}, {"end_weight_decay", 0.1}}),
                               40);
  resume["resume"] = {{"after", 17},
                      {"args", with({{"lr_decay_style", "cosine"}, {"lr_warmup_iters", 9},
                                     {"lr", 2e-3}, {"min_lr", 2e-5}, {"lr_decay_iters", 45},
                                     {"weight_decay_incr_style", "linear"},
                                     {"start_weight_decay", 0.02}, {"end_weight_decay", 0.3},
                                     {"use_checkpoint_opt_param_scheduler", true},
                                     {"global_batch_size", 8}})}};
  cases.push_back(resume);
  json override_case = resume;
  override_case["resume"]["args"].erase("use_checkpoint_opt_param_scheduler");
  override_case["resume"]["args"]["override_opt_param_scheduler"] = true;
  cases.push_back(override_case);
  return cases;
}

// Bad settings, each with the flag its message must name.
std::vector<std::pair<json, std::string>> bad_cases() {
  const json base = {{"train_iters", 100}, {"global_batch_size", 4}, {"lr", 1e-3}};
  auto with = [&](json extra) {
    json a = base;
    a.update(extra);
    return a;
  };
  return {
      {with({{"min_lr", -1e-5}}), "--min-lr"},
      {with({{"lr", 1e-5}, {"min_lr", 1e-4}}), "--lr="},
      {with({{"lr_warmup_init", 2e-3}}), "--lr-warmup-init"},
      {with({{"lr_warmup_iters", 100}}), "--lr-warmup-iters"},
      {with({{"lr_warmup_fraction", 1.0}}), "--lr-warmup-fraction"},
      {with({{"lr_decay_iters", 0}}), "--lr-decay-iters"},
      {with({{"lr_decay_style", "WSD"}}), "--lr-wsd-decay-iters"},
      {with({{"weight_decay", -0.1}}), "--start-weight-decay"},
      {with({{"weight_decay_incr_style", "linear"}, {"start_weight_decay", 0.1},
             {"end_weight_decay", 0.05}}), "--end-weight-decay"},
      {with({{"start_weight_decay", 0.1}, {"end_weight_decay", 0.2}}),
       "--weight-decay-incr-style constant"},
      {with({{"override_opt_param_scheduler", true},
             {"use_checkpoint_opt_param_scheduler", true}}), "--override-opt-param-scheduler"},
  };
}

double max_rel_diff(const json& ours, const json& ref) {
  double worst = 0.0;
  REQUIRE(ours.size() == ref.size());
  for (std::size_t s = 0; s < ours.size(); ++s)
    for (std::size_t g = 0; g < ours[s].size(); ++g) {
      const double a = ours[s][g], b = ref[s][g];
      const double scale = std::max(std::abs(a), std::abs(b));
      if (scale > 0) worst = std::max(worst, std::abs(a - b) / scale);
    }
  return worst;
}

}  // namespace

TEST_CASE("every schedule matches megatron-core's OptimizerParamScheduler step by step") {
  const json cases = good_cases();
  json all = cases;
  std::vector<std::pair<json, std::string>> bad = bad_cases();
  for (const auto& [args, flag] : bad)
    all.push_back({{"args", args}, {"groups", groups_for(1e-3, 0.0)}, {"increments", {4}}});
  const json ref = run_python_reference("lr_scheduler_reference.py", "batch", {{"cases", all}});

  double worst_lr = 0.0, worst_wd = 0.0;
  std::size_t points = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i << ": " << cases[i]["args"].dump());
    const json& r = ref["results"][i];
    REQUIRE_FALSE(r.contains("error"));
    const json ours = run_case(cases[i]);
    CHECK(ours["num_steps"] == r["num_steps"]);
    const double lr_diff = max_rel_diff(ours["lr"], r["lr"]);
    const double wd_diff = max_rel_diff(ours["wd"], r["wd"]);
    CHECK(lr_diff <= 1e-14);
    CHECK(wd_diff <= 1e-14);
    worst_lr = std::max(worst_lr, lr_diff);
    worst_wd = std::max(worst_wd, wd_diff);
    points += ours["lr"].size() * ours["lr"][0].size();
  }
  std::printf("LR schedule vs megatron-core: %zu cases, %zu group-steps, max rel diff lr %.3g, "
              "wd %.3g\n", cases.size(), points, worst_lr, worst_wd);

  for (std::size_t j = 0; j < bad.size(); ++j) {
    const auto& [args, flag] = bad[j];
    INFO("bad case " << args.dump());
    CHECK(ref["results"][cases.size() + j].contains("error"));  // megatron refuses it too
    std::vector<std::string> errors;
    try {
      errors = check_lr_scheduler_options(lr_scheduler_options_from_args(args_from_json(args)));
    } catch (const std::invalid_argument& e) {
      errors.push_back(e.what());
    }
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::Contains(flag));
  }
}

TEST_CASE("the scheduler reports every violated check in one pass and refuses to start") {
  lr_scheduler_options o;
  o.min_lr = -1.0;
  o.max_lr = -2.0;
  o.lr_decay_steps = 0;
  o.override_opt_param_scheduler = o.use_checkpoint_opt_param_scheduler = true;
  CHECK(check_lr_scheduler_options(o).size() == 5);
  CHECK_THROWS_WITH(lr_scheduler(o), Catch::Contains("--min-lr") && Catch::Contains("--lr=") &&
                                         Catch::Contains("--lr-warmup-init") &&
                                         Catch::Contains("--lr-decay-iters") &&
                                         Catch::Contains("--override-opt-param-scheduler"));
}

TEST_CASE("the flags translate into steps counted in samples") {
  lr_schedule_args a;
  a.train_iters = 100;
  a.global_batch_size = 32;
  a.lr = 1e-3;
  a.lr_warmup_iters = 10;
  a.lr_wsd_decay_iters = 20;
  a.lr_decay_style = "WSD";
  const lr_scheduler_options o = lr_scheduler_options_from_args(a);
  CHECK(o.lr_decay_steps == 3200);
  CHECK(o.wd_incr_steps == 3200);
  CHECK(o.lr_warmup_steps == 320);
  CHECK(o.wsd_decay_steps == 640);
  CHECK(o.start_wd == 0.01);  // --weight-decay, as validate_args sets it for constant
  a.lr_decay_style = "step";
  CHECK_THROWS_WITH(lr_scheduler_options_from_args(a),
                    Catch::Contains("--lr-decay-style=step") && Catch::Contains("WSD"));
  a.train_iters.reset();
  CHECK_THROWS_WITH(lr_scheduler_options_from_args(a),
                    Catch::Contains("--train-iters") && Catch::Contains("--train-samples"));
}

TEST_CASE("a resumed scheduler refuses a checkpoint whose schedule differs, unless told which wins") {
  lr_scheduler_options o;
  o.max_lr = 1e-3;
  o.lr_decay_steps = 100;
  lr_scheduler first(o);
  first.step(40);
  o.max_lr = 2e-3;
  lr_scheduler second(o);
  CHECK_THROWS_WITH(second.load_state(first.state()),
                    Catch::Contains("--use-checkpoint-opt-param-scheduler"));
  o.use_checkpoint_opt_param_scheduler = true;
  lr_scheduler third(o);
  third.load_state(first.state());
  CHECK(third.num_steps() == 40);
  CHECK(third.lr() == first.lr());
}
