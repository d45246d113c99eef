// The fp8 model tests' sweep: a model trains close to its fp32 self under every recipe and format.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/model/model_fixtures.hpp"

namespace mactor::test {

/// `steps` SGD steps of `c` (fp8 off) as the reference: it must fall by 10%; then with fp8 on under
/// each recipe and format (a history of 4 amaxes taken by their maximum) the losses must fall by
/// 10%, stay within 5% of the reference at every step and differ from it somewhere (the GEMMs did
/// round through fp8).
inline void check_fp8_trains_close_to_fp32(const model::gpt_model_config& c, int steps) {
  const auto reference = sgd_losses(c, steps);
  REQUIRE(reference.back() < 0.9 * reference.front());
  using R = model::fp8_recipe;
  for (auto recipe : {R::delayed, R::tensorwise, R::mxfp8, R::blockwise})
    for (auto format : {model::fp8_format::e4m3, model::fp8_format::hybrid}) {
      auto f = c;
      f.fp8.enabled = true, f.fp8.recipe = recipe, f.fp8.fp8 = format;
      f.fp8.fp8_amax_history_len = 4, f.fp8.amax_compute_algo = model::fp8_amax_compute_algo::max;
      const auto losses = sgd_losses(f, steps);
      INFO("recipe " << int(recipe) << " format " << int(format));
      CHECK(losses.back() < 0.9 * losses.front());
      double largest = 0, any = 0;
      for (int s = 0; s < steps; ++s) {
        largest = std::max(largest, std::fabs(losses[s] - reference[s]) / reference[s]);
        any += std::fabs(losses[s] - reference[s]);
      }
      CHECK(largest < 0.05);
      CHECK(any > 0);
    }
}

}  // namespace mactor::test
