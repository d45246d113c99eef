// Where a rank's model computes: the host, or the GPU of its local rank. While the GPU path is
// built up, MACTOR_DEVICE picks it: "cpu" (the default) or "cuda" (device local_rank, whose
// kernels and memory a backend must have registered). Megatron itself always trains on the GPU.
#pragma once

#include <string>

#include "config/megatron_args.hpp"
#include "tensor/dtype.hpp"

namespace mactor::training {

/// The device of MACTOR_DEVICE for this local rank, its backend loaded (tensor/device_backend.hpp).
/// Throws std::invalid_argument naming the variable for any other value, tensor::tensor_error
/// when the device cannot be used (no backend module, no such GPU).
tensor::device compute_device(int local_rank);

/// What of the run `a` has no device path yet, as one message naming each flag and the fix;
/// empty when the whole run can train on a GPU.
std::string device_gaps(const config::megatron_args& a);

}  // namespace mactor::training
