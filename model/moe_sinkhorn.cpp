// Sinkhorn balancing and the router's input jitter.
#include "model/moe_sinkhorn.hpp"

#include <cmath>

#include "kernels/dropout.hpp"

namespace mactor::model {

std::vector<float> sinkhorn_balanced(const std::vector<double>& logits, int rows, int experts, float tol) {
  const std::size_t T = std::size_t(rows), E = std::size_t(experts);
  std::vector<float> cost(T * E);
  for (std::size_t i = 0; i < cost.size(); ++i) cost[i] = std::exp(float(logits[i]));
  std::vector<float> d0(T, 1.0f), d1(E, 1.0f), d1_old = d1, column(E);
  const float eps = 1e-8f;
  float error = 1e9f;
  while (error > tol) {
    for (std::size_t t = 0; t < T; ++t) {
      float s = 0;
      for (std::size_t e = 0; e < E; ++e) s += d1[e] * cost[t * E + e];
      d0[t] = (1.0f / float(T)) / (s + eps);
    }
    std::fill(column.begin(), column.end(), 0.0f);
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t e = 0; e < E; ++e) column[e] += d0[t] * cost[t * E + e];
    error = 0;
    for (std::size_t e = 0; e < E; ++e) {
      d1[e] = (1.0f / float(E)) / (column[e] + eps);
      error += std::fabs(d1_old[e] - d1[e]);
    }
    error /= float(E);
    d1_old = d1;
  }
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t e = 0; e < E; ++e) cost[t * E + e] = d1[e] * cost[t * E + e] * d0[t];
  return cost;
}

double input_jitter(std::uint64_t stream, std::uint64_t index, double eps) {
  return (1.0 - eps) + 2.0 * eps * double(kernels::dropout_uniform(stream, index));
}

double random_logit(std::uint64_t stream, std::uint64_t index) {
  const double u1 = 1.0 - double(kernels::dropout_uniform(stream, 2 * index));  // (0, 1]
  const double u2 = double(kernels::dropout_uniform(stream, 2 * index + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

}  // namespace mactor::model
