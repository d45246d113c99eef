// What every CUDA kernel launcher shares: the stream type and the launch check.
#pragma once

#include "tensor/cuda/stream.hpp"

namespace mactor::kernels::cuda {

using mactor::cuda::stream_handle;

namespace detail {
/// Throws mactor::cuda::cuda_error naming `kernel` if its launch failed (bad configuration).
void check_launch(const char* kernel);
}  // namespace detail

}  // namespace mactor::kernels::cuda
