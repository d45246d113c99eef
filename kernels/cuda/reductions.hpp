// Whole-tensor reductions on a CUDA device (kernels/reductions.hpp): fp32 elements summed in
// double, queued on stream s. A fixed grid of reduction_blocks partial sums, then one block
// adds those up, so a reduction gives the same bits every time (not the CPU's order).
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// Doubles of scratch a reduction needs; its result lands in the last of them.
constexpr int reduction_scratch = 257;

/// scratch[reduction_scratch - 1] = sum of x[i]^2 over n elements.
void sum_of_squares(const float* x, std::int64_t n, double* scratch, stream_handle s = nullptr);
/// scratch[reduction_scratch - 1] = the number of zeros among x's n elements.
void count_zeros(const float* x, std::int64_t n, double* scratch, stream_handle s = nullptr);
/// scratch[reduction_scratch - 1] = the largest |x[i]| over n elements (NaN if one is NaN).
void amax(const float* x, std::int64_t n, double* scratch, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
