// Megatron's --check-weight-hash-across-dp-replicas-interval: every data-parallel replica must
// hold the same weights. Each rank hashes each of its parameters (FNV-1a over the bytes) and the
// replicas compare the hashes with sums only (the data plane's collective): split into 16-bit
// parts h, the sums of h and h^2 over n replicas equal n h and n h^2 exactly when every replica's
// part is h (equality in Cauchy-Schwarz), and all stay exact in a double.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::training {

std::uint64_t fnv1a_hash(tensor::const_tensor_view v);

/// What one replica contributes to the sums: per hash, per 16-bit part h, the pair (h, h^2).
std::vector<double> hash_part_moments(std::span<const std::uint64_t> hashes);

/// The indices of the hashes some replica holds differently. `sum_over_replicas` sums a vector
/// element-wise over the `replicas` replicas (every one calls it with the same length).
std::vector<std::size_t> differing_hashes(std::span<const std::uint64_t> mine, int replicas,
                                          const std::function<void(std::span<double>)>& sum_over_replicas);

}  // namespace mactor::training
