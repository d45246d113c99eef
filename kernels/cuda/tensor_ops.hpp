// Whole-tensor element-wise operations on a CUDA device: kernels/tensor_ops.hpp's scale and add,
// fp32, pointers into device memory, queued on stream s (copies and zeroes are the runtime's
// cudaMemcpyAsync and cudaMemsetAsync).
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// x[n] *= factor.
void scale(float* x, std::int64_t n, float factor, stream_handle s = nullptr);
/// dst[n] += src[n].
void add(float* dst, const float* src, std::int64_t n, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
