// The expected maximum of n standard normals by quadrature (see the header).
#include "simulate/rank_skew.hpp"

#include <cmath>
#include <map>
#include <mutex>

namespace mactor::simulate {

double expected_max_of_normals(int n) {
  if (n <= 1) return 0;
  static std::mutex guard;
  static std::map<int, double> cache;
  const std::lock_guard lock(guard);
  if (const auto it = cache.find(n); it != cache.end()) return it->second;
  // E[max] = integral of x n phi(x) Phi(x)^(n-1) dx; the density is negligible outside [-12, 12].
  const double step = 1e-3, pi = 3.14159265358979323846;
  double sum = 0;
  for (double x = -12; x <= 12; x += step) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * pi);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    sum += x * n * phi * std::pow(cdf, n - 1) * step;
  }
  return cache[n] = sum;
}

double slowest_rank_wait_seconds(const system_spec& system, int ranks, double compute_s) {
  if (system.compute_jitter <= 0 || ranks <= 1 || compute_s <= 0) return 0;
  return expected_max_of_normals(ranks) * system.compute_jitter * compute_s;
}

double synchronization_wait_seconds(const system_spec& system, int ranks, double synchronizations) {
  if (system.sync_jitter_s <= 0 || ranks <= 1 || synchronizations <= 0) return 0;
  return expected_max_of_normals(ranks) * system.sync_jitter_s * synchronizations;
}

double replica_wait_seconds(const system_spec& system, int replicas, int microbatches, const chunk_cost& c) {
  const double exposed = c.forward_tp_s + c.backward_tp_s + c.forward_cp_s + c.backward_cp_s + c.forward_ep_s +
                         c.backward_ep_s + c.forward_fsdp_s + c.backward_fsdp_s;
  return slowest_rank_wait_seconds(system, replicas, microbatches * (c.forward_s + c.backward_s - exposed));
}

}  // namespace mactor::simulate
