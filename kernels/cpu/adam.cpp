// Adam / AdamW on the CPU: one pass over the elements.
#include "kernels/adam.hpp"

#include <string>

#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::kernels {

namespace {

__attribute__((target_clones("fma", "default"))) void adam_update(float* __restrict value,
                                                                  const float* __restrict grad,
                                                                  float* __restrict m, float* __restrict v,
                                                                  std::int64_t n, adam_scalars k) {
  for (std::int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (k.decoupled) value[i] = value[i] * k.decay;
    else if (k.apply_l2) g = std::fma(k.l2, value[i], g);
    m[i] = std::fma(k.one_minus_beta1, g, m[i] * k.beta1);
    v[i] = v[i] * k.beta2 + k.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v[i]) / k.bias_correction2_sqrt + k.eps;
    value[i] = value[i] + k.neg_step_size * m[i] / denom;
  }
}

}  // namespace

void adam_step(tensor::tensor_view value, tensor::const_tensor_view grad, tensor::tensor_view exp_avg,
               tensor::tensor_view exp_avg_sq, const adam_hyperparameters& h) {
  for (const tensor::const_tensor_view& v : {tensor::const_tensor_view(value), grad, tensor::const_tensor_view(exp_avg),
                                             tensor::const_tensor_view(exp_avg_sq)}) {
    if (v.type != tensor::dtype::float32 || v.where != value.where)
      throw unsupported_kernel("adam_step", v.type, v.where);
    if (v.numel() != value.numel())
      throw tensor::tensor_error("kernel adam_step: buffers of " + std::to_string(v.numel()) + " and " +
                                 std::to_string(value.numel()) + " elements");
  }
  if (on_device(value)) return device_kernels_for("adam_step", value).adam_step(value, grad, exp_avg, exp_avg_sq, h);
  adam_update(static_cast<float*>(value.data), static_cast<const float*>(grad.data),
              static_cast<float*>(exp_avg.data), static_cast<float*>(exp_avg_sq.data), value.numel(),
              adam_scalars_for(h));
}

}  // namespace mactor::kernels
