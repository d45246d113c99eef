// SGD on a CUDA device (kernels/sgd.hpp's contract): the CPU loop's fused multiply-adds and no
// others, so a step gives the CPU's bits. fp32 buffers in device memory, queued on stream s.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"
#include "kernels/sgd_scalars.hpp"

namespace mactor::kernels::cuda {

/// Updates value (and buf, null without momentum) in place from grad, n elements each.
void sgd_step(float* value, const float* grad, float* buf, std::int64_t n, const sgd_hyperparameters& h,
              stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
