// Grid-stride loops for the elementwise kernels:
//   for (long long e = first_element(); e < count; e += grid_stride()) ...
// so a launch of any size covers any count.
#pragma once

#include <algorithm>

namespace mactor::kernels::cuda::detail {

/// Threads per block of a grid-stride kernel, and its blocks for `count` elements: one element per
/// thread up to 65535 * 16 blocks, past that each thread takes several.
constexpr int grid_threads = 256;
inline int grid_blocks(long long count) {
  return int(std::min<long long>((count + grid_threads - 1) / grid_threads, 65535LL * 16));
}

__device__ inline long long first_element() { return blockIdx.x * (long long)blockDim.x + threadIdx.x; }
__device__ inline long long grid_stride() { return (long long)gridDim.x * blockDim.x; }

}  // namespace mactor::kernels::cuda::detail
