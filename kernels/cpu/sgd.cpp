// SGD's element loop on the CPU and the entry point's checks (kernels/sgd.hpp).
#include "kernels/sgd.hpp"

#include <cmath>
#include <string>

#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::kernels {

namespace {

// One pass over a tensor; the fma clone keeps std::fma inline where the CPU has it.
__attribute__((target_clones("fma", "default"))) void sgd_update(
    float* __restrict value, const float* __restrict grad, float* __restrict buf, std::int64_t n, sgd_scalars s) {
  for (std::int64_t i = 0; i < n; ++i) {
    float d_p = s.use_weight_decay ? std::fma(s.weight_decay, value[i], grad[i]) : grad[i];
    if (s.use_momentum) {
      buf[i] = s.first_step ? d_p : std::fma(s.keep, d_p, buf[i] * s.momentum);
      d_p = s.nesterov ? std::fma(s.momentum, buf[i], d_p) : buf[i];
    }
    value[i] = std::fma(s.neg_lr, d_p, value[i]);
  }
}

}  // namespace

void sgd_step(tensor::tensor_view value, tensor::const_tensor_view grad, tensor::tensor_view momentum_buffer,
              const sgd_hyperparameters& h) {
  const bool momentum = h.momentum != 0.0;
  if (momentum && !momentum_buffer.data)
    throw tensor::tensor_error("kernel sgd_step: --sgd-momentum " + std::to_string(h.momentum) +
                               " needs a momentum buffer");
  for (const tensor::const_tensor_view& v :
       {tensor::const_tensor_view(value), grad, momentum ? tensor::const_tensor_view(momentum_buffer) : grad}) {
    if (v.type != tensor::dtype::float32 || v.where != value.where) throw unsupported_kernel("sgd_step", v.type, v.where);
    if (v.numel() != value.numel())
      throw tensor::tensor_error("kernel sgd_step: buffers of " + std::to_string(v.numel()) + " and " +
                                 std::to_string(value.numel()) + " elements");
  }
  if (!momentum) momentum_buffer = {};
  if (on_device(value)) return device_kernels_for("sgd_step", value).sgd_step(value, grad, momentum_buffer, h);
  sgd_update(static_cast<float*>(value.data), static_cast<const float*>(grad.data),
             static_cast<float*>(momentum_buffer.data), value.numel(), sgd_scalars_for(h));
}

}  // namespace mactor::kernels
