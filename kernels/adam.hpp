// One Adam / AdamW step on a parameter's fp32 buffers, as torch.optim.AdamW (1.13's
// _single_tensor_adamw) and Megatron's FusedAdam with fp32 moments make it, for every element:
//   AdamW: value *= 1 - lr * weight_decay;   Adam with L2: g += weight_decay * value
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   value += -(lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),  bc_i = 1 - beta_i^step
// The scalars are made in double, as Python makes them, and rounded to float once; torch's
// add(alpha=) is a fused multiply-add, its addcmul and addcdiv are not. Every backend makes the
// same roundings, so a step gives the same bits on the CPU and on a device.
#pragma once

#include "kernels/adam_scalars.hpp"
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// Updates value, exp_avg and exp_avg_sq in place from grad: four fp32 views of one element
/// count on one device.
void adam_step(tensor::tensor_view value, tensor::const_tensor_view grad, tensor::tensor_view exp_avg,
               tensor::tensor_view exp_avg_sq, const adam_hyperparameters& h);

}  // namespace mactor::kernels
