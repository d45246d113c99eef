// L2Norm over the RMSNorm kernels (a norm without weights is RMSNorm with a unit scale).
#include "model/l2_norm.hpp"

#include "kernels/dispatch.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"

namespace mactor::model {

tensor::const_tensor_view l2_norm::unit_scale(tensor::dtype type) {
  if (zeros_.numel() != width_ || zeros_.type() != type) {
    zeros_ = tensor::tensor({width_}, type, tensor::memory_kind::other);
    kernels::fill_zero(zeros_);
  }
  return zeros_;
}

void l2_norm::forward(tensor::const_tensor_view x, tensor::tensor_view y, int rows) {
  // The statistics in fp32 for a 16-bit model (L2Norm's x.float()), the output rounded once.
  auto rstd = ensure_activation(rstd_, rows, 1, kernels::compute_dtype(x.type));
  kernels::rmsnorm_forward(y, rstd, x, unit_scale(x.type), rows, width_, eps_, true);
}

void l2_norm::backward(tensor::const_tensor_view dy, tensor::const_tensor_view x, tensor::tensor_view dx, int rows,
                       bool accumulate) {
  if (dgamma_.numel() != width_ || dgamma_.type() != x.type)
    dgamma_ = tensor::tensor({width_}, x.type, tensor::memory_kind::other);
  kernels::fill_zero(dgamma_);
  kernels::rmsnorm_backward(dx, dgamma_, dy, x, unit_scale(x.type), rstd_, rows, width_, true, accumulate);
}

}  // namespace mactor::model
