// Multi-tensor Adam/AdamW on a CUDA device, the update model/optimizer_adam.cpp makes on the
// CPU (torch's FusedAdam with fp32 moments): for every element,
//   AdamW: value *= 1 - lr * weight_decay;   Adam with L2: g += weight_decay * value
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   value += -(lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),  bc_i = 1 - beta_i^step
// with the same fused multiply-adds and no others, so the result matches the CPU bit for bit
// when both round IEEE (nvcc's default -prec-div/-prec-sqrt). Many tensors share one launch.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/adam_scalars.hpp"
#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// One parameter's buffers in device memory, numel floats each.
struct adam_tensor {
  float* value = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  std::int64_t numel = 0;
};

using kernels::adam_hyperparameters;

/// Updates every tensor in place (values and both moments).
void adam_step(std::span<const adam_tensor> tensors, const adam_hyperparameters& h, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda
