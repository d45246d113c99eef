// MLP block over the kernels.
#include "model/mlp.hpp"

#include <cmath>

#include "kernels/gelu.hpp"
#include "kernels/squared_relu.hpp"
#include "kernels/swiglu.hpp"
#include "model/activation.hpp"

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

mlp::mlp(parameter_store& store, const std::string& name, const gpt_model_config& c, int tp_size)
    : gated_(c.gated_linear_unit()),
      plain_swiglu_(c.swiglu && !c.activation_func_clamp_value && c.glu_linear_offset == 0.0f),
      squared_relu_(c.squared_relu), tanh_gelu_(c.gelu_tanh_approximation),
      recompute_(c.recompute.selective(c.recompute.mlp)), glu_(glu_options_of(c)),
      ffn_local_(c.ffn_hidden_size / tp_size),
      linear_fc1_(store, name + ".linear_fc1", c.hidden_size,
                  gated_ ? 2 * c.ffn_hidden_size : c.ffn_hidden_size, c.add_bias_linear,
                  gated_ ? tp_split::row_halves : tp_split::rows, c.init_method_std, tp_size,
                  c.sequence_parallel, c.fp8),
      linear_fc2_(store, name + ".linear_fc2", c.ffn_hidden_size, c.hidden_size,
                  c.add_bias_linear, c.init_method_std / std::sqrt(2.0 * c.num_layers), tp_size,
                  c.sequence_parallel, c.fp8) {}

void mlp::activation_forward(tensor::tensor_view act, tensor::const_tensor_view fc1) const {
  const std::int64_t n = std::int64_t(rows_) * ffn_local_;
  if (plain_swiglu_)
    kernels::swiglu_forward(act, fc1, rows_, ffn_local_);
  else if (gated_)
    kernels::glu_forward(act, fc1, rows_, ffn_local_, glu_);
  else if (squared_relu_)
    kernels::squared_relu_forward(act, fc1, n);
  else
    kernels::gelu_forward(act, fc1, n, tanh_gelu_);
}

void mlp::activation_backward(tensor::tensor_view dfc1, tensor::const_tensor_view dact) const {
  const std::int64_t n = std::int64_t(rows_) * ffn_local_;
  if (plain_swiglu_)
    kernels::swiglu_backward(dfc1, dact, fc1_, rows_, ffn_local_);
  else if (gated_)
    kernels::glu_backward(dfc1, dact, fc1_, rows_, ffn_local_, glu_);
  else if (squared_relu_)
    kernels::squared_relu_backward(dfc1, dact, fc1_, n);
  else
    kernels::gelu_backward(dfc1, dact, fc1_, n, tanh_gelu_);
}

void mlp::forward_inner(const parameter_store& store, group& tp, tensor::const_tensor_view x) {
  auto fc1 = ensure_activation(fc1_, rows_, linear_fc1_.out_local(), x.type);
  auto act = ensure_activation(act_, rows_, ffn_local_, x.type);
  linear_fc1_.forward(store, tp, x, fc1, rows_);
  activation_forward(act, fc1);
}

void mlp::forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                  tensor::tensor_view out, int rows) {
  rows_ = rows;
  forward_inner(store, tp, x);
  linear_fc2_.forward(store, tp, act_, out, rows);
  if (recompute_) fc1_ = tensor::tensor(), act_ = tensor::tensor();
}

void mlp::backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                   tensor::const_tensor_view x, tensor::tensor_view dx) {
  if (recompute_) forward_inner(store, tp, x);
  auto dact = ensure_activation(dact_, rows_, ffn_local_, dout.type);
  auto dfc1 = ensure_activation(dfc1_, rows_, linear_fc1_.out_local(), dout.type);
  linear_fc2_.backward(store, tp, dout, act_, dact, rows_);
  activation_backward(dfc1, dact);
  linear_fc1_.backward(store, tp, dfc1, x, dx, rows_);
}

void mlp::release() {
  for (auto* t : {&fc1_, &act_, &dact_, &dfc1_}) *t = tensor::tensor();
  linear_fc1_.release();
  linear_fc2_.release();
}

}  // namespace mactor::model
