// Bias add over rows and its backward on a CUDA device: kernels/bias.hpp's contract, fp32,
// pointers into device memory, queued on stream s.
#pragma once

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// y[n, w] += bias[w]
void bias_add(float* y, const float* bias, int n, int w, stream_handle s = nullptr);
/// dbias[w] += sum over rows of dy[n, w] (summed in a fixed order: deterministic).
void bias_backward(float* dbias, const float* dy, int n, int w, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
