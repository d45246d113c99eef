// Normally distributed floats for the benchmarks' inputs (the same draw for the same seed).
#pragma once
#include <cstddef>
#include <random>
#include <vector>

namespace mactor::bench {

inline std::vector<float> randn(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace mactor::bench
