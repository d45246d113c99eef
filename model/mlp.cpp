// MLP block over the kernels.
#include "model/mlp.hpp"

#include <cmath>

#include "model/activation.hpp"

namespace mactor::model {

mlp::mlp(parameter_store& store, const std::string& name, const gpt_model_config& c, int tp_size)
    : activation_(c), recompute_(c.recompute.selective(c.recompute.mlp)),
      ffn_local_(c.ffn_hidden_size / tp_size),
      linear_fc1_(store, name + ".linear_fc1", c.hidden_size,
                  activation_.gated() ? 2 * c.ffn_hidden_size : c.ffn_hidden_size, c.add_bias_linear,
                  activation_.gated() ? tp_split::row_halves : tp_split::rows, c.init_method_std, tp_size,
                  c.sequence_parallel, c.fp8),
      linear_fc2_(store, name + ".linear_fc2", c.ffn_hidden_size, c.hidden_size,
                  c.add_bias_linear, c.output_layer_init_std(), tp_size,
                  c.sequence_parallel, c.fp8) {}

void mlp::forward_inner(const parameter_store& store, group& tp, tensor::const_tensor_view x) {
  auto fc1 = ensure_activation(fc1_, rows_, linear_fc1_.out_local(), x.type);
  auto act = ensure_activation(act_, rows_, ffn_local_, x.type);
  linear_fc1_.forward(store, tp, x, fc1, rows_);
  activation_.forward(act, fc1, rows_, ffn_local_);
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
  activation_.backward(dfc1, dact, fc1_, rows_, ffn_local_);
  linear_fc1_.backward(store, tp, dfc1, x, dx, rows_);
}

void mlp::release() {
  for (auto* t : {&fc1_, &act_, &dact_, &dfc1_}) *t = tensor::tensor();
  linear_fc1_.release();
  linear_fc2_.release();
}

}  // namespace mactor::model
