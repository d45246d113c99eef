// Megatron's model-FLOPs count per iteration (training.py num_floating_point_operations), for
// --log-throughput.
#pragma once

#include <cstdint>

#include "config/megatron_args.hpp"

namespace mactor::training {

/// Forward + backward FLOPs of one iteration over `batch_size` sequences of a dense GPT, by
/// Megatron's formula: 12 (fwd+bwd, multiply-add, two GEMMs) per layer for the MLP and the
/// attention projections, causal attention scores counted at half, and the logit layer 6*h*V.
double num_floating_point_operations(const config::megatron_args& args, std::int64_t padded_vocab_size,
                                     std::int64_t batch_size);

}  // namespace mactor::training
