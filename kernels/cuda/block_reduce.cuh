// Sums and maxima across a thread block, for the row kernels (one block per row): a warp
// reduces with shuffles, warp leaders meet in shared memory, and every thread gets the result.
#pragma once

#include <cfloat>

namespace mactor::kernels::cuda::detail {

constexpr int warp_size = 32;
constexpr int row_block = 256;  // threads per row in the row kernels

struct sum_op {
  __device__ float operator()(float a, float b) const { return a + b; }
  static constexpr float identity = 0.0f;
};
struct max_op {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float identity = -FLT_MAX;
};

template <class Op>
__device__ float warp_reduce(float v, Op op) {
  for (int offset = warp_size / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// The reduction of every thread's v over the block (blockDim.x a multiple of 32, at most 1024).
template <class Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % warp_size;
  const int warp = threadIdx.x / warp_size;
  v = warp_reduce(v, op);
  __syncthreads();  // partial may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / warp_size;
  v = lane < warps ? partial[lane] : Op::identity;
  return warp_reduce(v, op);
}

inline int blocks_for(long long n, int threads) { return int((n + threads - 1) / threads); }

}  // namespace mactor::kernels::cuda::detail
