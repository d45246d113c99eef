// What the kernel checks share: random inputs, widening to double, and the element-by-element
// comparison |got - want| <= tolerance * (1 + |want|) that names the first element out of it.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/kernel_backend.hpp"

namespace mactor::testing {

using doubles = std::vector<double>;

inline floats random_floats(std::size_t count, std::mt19937& rng, float scale = 1.f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  floats v(count);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline doubles widen(const floats& v) { return doubles(v.begin(), v.end()); }

// Every element within tolerance of the reference; names the first one that is not.
inline void require_close(const std::string& what, const floats& got, const doubles& want, double tolerance) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) <= tolerance * (1 + std::abs(want[i]))) continue;
    FAIL(what << "[" << i << "] = " << got[i] << ", reference " << want[i] << " (tolerance " << tolerance << ")");
  }
  SUCCEED(what << ": " << got.size() << " elements within " << tolerance);
}

}  // namespace mactor::testing
