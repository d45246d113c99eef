// Helpers for kernel tests: random inputs, central finite differences in double precision and a
// relative L2 error to compare an analytic gradient against them.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace mactor::test {

inline std::vector<double> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

/// d loss / d x by central differences; x is restored afterwards.
inline std::vector<double> numeric_gradient(const std::function<double()>& loss,
                                            std::vector<double>& x, double step = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + step;
    const double up = loss();
    x[i] = keep - step;
    const double down = loss();
    x[i] = keep;
    g[i] = (up - down) / (2 * step);
  }
  return g;
}

/// ||a - b|| / ||b|| (or the absolute norm when b is zero).
template <typename A, typename B>
double relative_error(const A& a, const B& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    ref += double(b[i]) * double(b[i]);
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

/// sum_i w[i] * y[i]: the scalar whose gradient w.r.t. y is w (the usual probe for backward).
inline double dot(const std::vector<double>& w, const std::vector<double>& y) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
  return s;
}

}  // namespace mactor::test
