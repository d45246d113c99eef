// Where a rank's model computes: the host, or the GPU of its local rank. While the GPU path is
// built up, MACTOR_DEVICE picks it: "cpu" (the default) or "cuda" (device local_rank, whose
// kernels and memory a backend must have registered). Megatron itself always trains on the GPU.
#pragma once

#include "tensor/dtype.hpp"

namespace mactor::training {

/// The device of MACTOR_DEVICE for this local rank; throws std::invalid_argument naming the
/// variable for any other value.
tensor::device compute_device(int local_rank);

}  // namespace mactor::training
