// The launch check.
#include "kernels/cuda/launch.hpp"

#include <cuda_runtime_api.h>

#include "tensor/cuda/device.hpp"

namespace mactor::kernels::cuda {

void detail::check_launch(const char* kernel) { mactor::cuda::detail::check(cudaGetLastError(), kernel); }

}  // namespace mactor::kernels::cuda
