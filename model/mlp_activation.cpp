// The MLP activation's choice and its kernels.
#include "model/mlp_activation.hpp"

#include "kernels/gelu.hpp"
#include "kernels/squared_relu.hpp"
#include "kernels/swiglu.hpp"

namespace mactor::model {
namespace {

kernels::glu_options glu_options_of(const gpt_model_config& c) {
  kernels::glu_options o;
  o.activation = c.quick_geglu ? kernels::glu_activation::quick_gelu : kernels::glu_activation::silu;
  if (c.activation_func_clamp_value) o.clamp = *c.activation_func_clamp_value;
  o.linear_offset = c.glu_linear_offset;
  return o;
}

}  // namespace

mlp_activation::mlp_activation(const gpt_model_config& c)
    : gated_(c.gated_linear_unit()),
      plain_swiglu_(c.swiglu && !c.activation_func_clamp_value && c.glu_linear_offset == 0.0f),
      squared_relu_(c.squared_relu), tanh_gelu_(c.gelu_tanh_approximation), glu_(glu_options_of(c)) {}

void mlp_activation::forward(tensor::tensor_view act, tensor::const_tensor_view fc1, int rows, int width) const {
  const std::int64_t n = std::int64_t(rows) * width;
  if (plain_swiglu_)
    kernels::swiglu_forward(act, fc1, rows, width);
  else if (gated_)
    kernels::glu_forward(act, fc1, rows, width, glu_);
  else if (squared_relu_)
    kernels::squared_relu_forward(act, fc1, n);
  else
    kernels::gelu_forward(act, fc1, n, tanh_gelu_);
}

void mlp_activation::backward(tensor::tensor_view dfc1, tensor::const_tensor_view dact,
                              tensor::const_tensor_view fc1, int rows, int width) const {
  const std::int64_t n = std::int64_t(rows) * width;
  if (plain_swiglu_)
    kernels::swiglu_backward(dfc1, dact, fc1, rows, width);
  else if (gated_)
    kernels::glu_backward(dfc1, dact, fc1, rows, width, glu_);
  else if (squared_relu_)
    kernels::squared_relu_backward(dfc1, dact, fc1, n);
  else
    kernels::gelu_backward(dfc1, dact, fc1, n, tanh_gelu_);
}

}  // namespace mactor::model
