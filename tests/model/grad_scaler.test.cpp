// The loss scaler against megatron-core's own DynamicGradScaler on the same found_inf flags: the
// same scale after every update (backoff with hysteresis, the floor, growth after the window)
// and the same state to checkpoint; unscaling finds an inf or a NaN and divides the rest.
#include "model/grad_scaler.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tests/model/optimizer_python_reference.hpp"

using namespace mactor;

TEST_CASE("the dynamic loss scaler follows megatron-core's DynamicGradScaler step for step") {
  model::grad_scaler_options o;
  o.initial_scale = 1024.0f, o.min_scale = 4.0f, o.growth_interval = 3, o.hysteresis = 2;
  // Runs of overflows long enough to reach the floor, single ones that hysteresis absorbs, and
  // clean runs long enough to grow.
  std::vector<int> found;
  std::mt19937 rng(3);
  for (int i = 0; i < 12; ++i) found.push_back(1);
  for (int i = 0; i < 150; ++i) found.push_back(rng() % 4 == 0);
  for (int i = 0; i < 10; ++i) found.push_back(0);
  model::grad_scaler scaler(o);
  std::vector<double> ours;
  for (int f : found) {
    scaler.update(f != 0);
    ours.push_back(scaler.scale());
  }
  const auto ref = test::run_python_reference(
      "grad_scaler_reference.py", "dynamic",
      {{"options", {{"initial_scale", 1024.0}, {"min_scale", 4.0}, {"growth_interval", 3}, {"hysteresis", 2}}},
       {"found_inf", found}});
  const auto want = ref["scales"].get<std::vector<double>>();
  REQUIRE(want.size() == ours.size());
  CHECK(ours == want);
  CHECK(*std::min_element(ours.begin(), ours.end()) == 4.0);   // the floor was reached
  bool grew = false;  // and growth happened
  for (std::size_t i = 1; i < ours.size(); ++i) grew |= ours[i] > ours[i - 1];
  CHECK(grew);
  CHECK(scaler.state().growth_tracker == ref["state"]["growth_tracker"].get<std::int64_t>());
  CHECK(scaler.state().hysteresis_tracker == ref["state"]["hysteresis_tracker"].get<std::int64_t>());
}

TEST_CASE("a constant loss scaler never changes, and bad options are refused") {
  model::grad_scaler_options o;
  o.dynamic = false, o.initial_scale = 128.0f;
  model::grad_scaler constant(o);
  constant.update(true);
  constant.update(false);
  CHECK(constant.scale() == 128.0f);
  model::grad_scaler_options bad;
  bad.min_scale = 2.0f * bad.initial_scale;
  CHECK_THROWS_WITH(model::grad_scaler(bad), Catch::Contains("--min-loss-scale"));
  bad = {};
  bad.hysteresis = 0;
  CHECK_THROWS_WITH(model::grad_scaler(bad), Catch::Contains("--hysteresis"));
}

TEST_CASE("unscaling multiplies every main gradient by 1/scale and reports an inf or a NaN") {
  std::vector<float> a{2.0f, -4.0f, 8.0f}, b{16.0f};
  std::vector<model::optim_param> params(2);
  params[0].grad = a.data(), params[0].numel = a.size();
  params[1].grad = b.data(), params[1].numel = b.size();
  CHECK_FALSE(model::unscale_and_check(params, 0.25f));
  CHECK(a == std::vector<float>{0.5f, -1.0f, 2.0f});
  CHECK(b[0] == 4.0f);
  b[0] = std::numeric_limits<float>::infinity();
  CHECK(model::unscale_and_check(params, 1.0f));
  b[0] = std::nanf("");
  CHECK(model::unscale_and_check(params, 1.0f));
}
