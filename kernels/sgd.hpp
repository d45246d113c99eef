// One SGD step on a parameter's fp32 buffers, in torch.optim.SGD's order (its single-tensor CPU
// path), for every element:
//   d_p = grad + weight_decay * value;   buf = momentum * buf + (1 - dampening) * d_p
//   (buf = d_p on the first step);  d_p = nesterov ? d_p + momentum * buf : buf;  value -= lr * d_p
// torch's vectorized add(alpha=) is a fused multiply-add, so those steps are fmas on every
// backend, and a step gives the same bits on the CPU and on a device.
#pragma once

#include "kernels/sgd_scalars.hpp"
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// Updates value (and momentum_buffer, empty without momentum) in place from grad: fp32 views of
/// one element count on one device.
void sgd_step(tensor::tensor_view value, tensor::const_tensor_view grad, tensor::tensor_view momentum_buffer,
              const sgd_hyperparameters& h);

}  // namespace mactor::kernels
