// Grid-stride loops for the elementwise kernels:
//   for (long long e = first_element(); e < count; e += grid_stride()) ...
// so a launch of any size covers any count.
#pragma once

namespace mactor::kernels::cuda::detail {

__device__ inline long long first_element() { return blockIdx.x * (long long)blockDim.x + threadIdx.x; }
__device__ inline long long grid_stride() { return (long long)gridDim.x * blockDim.x; }

}  // namespace mactor::kernels::cuda::detail
