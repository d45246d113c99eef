// Dropout and bias-dropout-add on a CUDA device: kernels/dropout.hpp's contracts, fp32, pointers
// into device memory, queued on stream s. The masks come from the CPU kernels' own generator
// (kernels/dropout_hash.hpp) and the arithmetic is rounded in the same order, so both backends
// give the same bits.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// y[n] = keep(i) ? x[n] * (1 / (1 - p)) : 0, keep from (stream, first_index + i); y may alias x.
/// The backward is the same call on the gradient.
void dropout_apply(float* y, const float* x, std::int64_t n, float p, std::uint64_t stream,
                   std::uint64_t first_index = 0, stream_handle s = nullptr);

/// out[n, w] = residual + dropout(x + bias) (bias may be null; out may alias residual or x); the
/// mask index of element (i, j) is first_index + i * w + j.
void bias_dropout_add(float* out, const float* residual, const float* x, const float* bias, int n, int w,
                      float p, std::uint64_t stream, std::uint64_t first_index = 0, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
