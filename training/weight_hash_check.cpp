// Hashing parameters and comparing the hashes across the replicas.
#include "training/weight_hash_check.hpp"

namespace mactor::training {

std::uint64_t fnv1a_hash(tensor::const_tensor_view v) {
  const auto* bytes = static_cast<const unsigned char*>(v.data);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0, n = v.nbytes(); i < n; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
}

namespace {
constexpr int parts = 4;
double part(std::uint64_t hash, int k) { return double((hash >> (16 * k)) & 0xffff); }
}  // namespace

std::vector<double> hash_part_moments(std::span<const std::uint64_t> hashes) {
  std::vector<double> moments(hashes.size() * parts * 2);
  for (std::size_t i = 0; i < hashes.size(); ++i)
    for (int k = 0; k < parts; ++k) {
      const double h = part(hashes[i], k);
      moments[(i * parts + k) * 2] = h;
      moments[(i * parts + k) * 2 + 1] = h * h;
    }
  return moments;
}

std::vector<std::size_t> differing_hashes(std::span<const std::uint64_t> mine, int replicas,
                                          const std::function<void(std::span<double>)>& sum_over_replicas) {
  auto sums = hash_part_moments(mine);
  sum_over_replicas(sums);
  std::vector<std::size_t> differing;
  for (std::size_t i = 0; i < mine.size(); ++i)
    for (int k = 0; k < parts; ++k) {
      const double h = part(mine[i], k);
      if (sums[(i * parts + k) * 2] != replicas * h || sums[(i * parts + k) * 2 + 1] != replicas * h * h) {
        differing.push_back(i);
        break;
      }
    }
  return differing;
}

}  // namespace mactor::training
