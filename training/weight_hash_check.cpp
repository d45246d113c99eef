// Hashing parameters and comparing the hashes across the replicas.
#include "training/weight_hash_check.hpp"

namespace mactor::training {

std::uint64_t fnv1a_hash(tensor::const_tensor_view v) {
  const auto* bytes = static_cast<const unsigned char*>(v.data);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0, n = v.nbytes(); i < n; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
}

std::vector<std::size_t> differing_hashes(std::span<const std::uint64_t> mine, int replicas,
                                          const std::function<void(std::span<double>)>& sum_over_replicas) {
  constexpr int parts = 4;
  std::vector<double> sums(mine.size() * parts * 2);
  for (std::size_t i = 0; i < mine.size(); ++i)
    for (int k = 0; k < parts; ++k) {
      const double h = double((mine[i] >> (16 * k)) & 0xffff);
      sums[(i * parts + k) * 2] = h;
      sums[(i * parts + k) * 2 + 1] = h * h;
    }
  sum_over_replicas(sums);
  std::vector<std::size_t> differing;
  for (std::size_t i = 0; i < mine.size(); ++i)
    for (int k = 0; k < parts; ++k) {
      const double h = double((mine[i] >> (16 * k)) & 0xffff);
      if (sums[(i * parts + k) * 2] != replicas * h || sums[(i * parts + k) * 2 + 1] != replicas * h * h) {
        differing.push_back(i);
        break;
      }
    }
  return differing;
}

}  // namespace mactor::training
