// Squared ReLU and its per-row weighted form on a CUDA device: kernels/squared_relu.hpp's
// contracts, fp32, pointers into device memory, queued on stream s.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// y[n] = max(x[n], 0)^2; y may alias x.
void squared_relu_forward(float* y, const float* x, std::int64_t n, stream_handle s = nullptr);
/// dx[n] = dy[n] * 2 max(x[n], 0); dx may alias dy.
void squared_relu_backward(float* dx, const float* dy, const float* x, std::int64_t n, stream_handle s = nullptr);

/// y[i, j] = relu(x[i, j])^2 * w[i] for a [rows, width] x.
void weighted_squared_relu_forward(float* y, const float* x, const float* w, std::int64_t rows, int width,
                                   stream_handle s = nullptr);
/// dx[i, j] = dy[i, j] * w[i] * 2 relu(x[i, j]); dw[i] = sum_j relu(x[i, j])^2 dy[i, j] (one block
/// per row, summed in a fixed order).
void weighted_squared_relu_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                                    std::int64_t rows, int width, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
