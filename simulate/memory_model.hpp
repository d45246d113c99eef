// Peak memory of one rank: weights, gradients and optimizer state by Megatron's byte counts
// (theoretical_memory_usage.py: 18 bytes per parameter, or 6 + 12 / dp with the distributed
// optimizer), and the activations the simulated schedule actually held at its peak.
#pragma once

#include <vector>

#include "config/megatron_args.hpp"
#include "simulate/cost_model.hpp"

namespace mactor::simulate {

struct rank_memory {
  double parameters = 0;   ///< bytes of the model weights in the training dtype
  double gradients = 0;    ///< the main-gradient buffer
  double optimizer = 0;    ///< fp32 main weights (mixed precision) and Adam's two moments, sharded
  double activations = 0;  ///< peak over the iteration
  double total() const { return parameters + gradients + optimizer + activations; }
};

/// Memory of the rank whose chunks are `chunks`, given its simulated activation peak.
rank_memory memory_of(const config::megatron_args& a, const std::vector<chunk_cost>& chunks,
                      double peak_activation_bytes);

}  // namespace mactor::simulate
