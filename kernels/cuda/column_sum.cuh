// out[j] += sum over rows of term(row, j): the weight gradients of the norms (dgamma, dbeta).
// A block owns 32 columns; its 8 warps-rows stride over the rows and meet in shared memory, so
// the order of the sum is fixed and the result deterministic (no atomics).
#pragma once

#include "kernels/cuda/block_reduce.cuh"

namespace mactor::kernels::cuda::detail {

constexpr int column_tile = 32;
constexpr int column_row_groups = 8;

template <class Term>
__global__ void column_sum_kernel(float* out, Term term, int n, int h) {
  __shared__ float partial[column_row_groups][column_tile];
  const int j = blockIdx.x * column_tile + threadIdx.x;
  float sum = 0;
  if (j < h)
    for (long long row = threadIdx.y; row < n; row += column_row_groups) sum += term(row, j, h);
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < h) {
    float total = 0;
    for (int g = 0; g < column_row_groups; ++g) total += partial[g][threadIdx.x];
    out[j] += total;
  }
}

/// The term of add_column_sums for a matrix's own elements: out[j] += sum over rows of m[row, j].
struct matrix_elements {
  const float* m;
  __device__ float operator()(long long row, int j, int h) const { return m[row * h + j]; }
};

template <class Term>
void add_column_sums(float* out, Term term, int n, int h, cudaStream_t s) {
  if (h == 0) return;
  const dim3 block(column_tile, column_row_groups);
  column_sum_kernel<<<blocks_for(h, column_tile), block, 0, s>>>(out, term, n, h);
}

}  // namespace mactor::kernels::cuda::detail
