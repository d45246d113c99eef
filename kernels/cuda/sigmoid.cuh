// The logistic function as the element-wise kernels compute it (SwiGLU, the Mamba conv's and
// gated norm's SiLU): 1 / (1 + exp(-v)) in fp32.
#pragma once

namespace mactor::kernels::cuda::detail {

__device__ inline float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

}  // namespace mactor::kernels::cuda::detail
