// The activation between an MLP's fc1 and fc2 as Megatron's config picks it: fused SwiGLU, a
// gated unit with --quick-geglu / --activation-func-clamp-value / --glu-linear-offset (Megatron's
// unfused glu), squared ReLU or GeLU (tanh-approximated or exact). The dense MLP and the MoE
// experts share it.
#pragma once
#include "kernels/glu.hpp"
#include "model/gpt_model_config.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class mlp_activation {
 public:
  explicit mlp_activation(const gpt_model_config& config);
  /// Whether fc1 gives [gate; up] halves (2 * width columns).
  bool gated() const { return gated_; }
  /// act[rows, width] = act(fc1[rows, (gated ? 2 : 1) * width]).
  void forward(tensor::tensor_view act, tensor::const_tensor_view fc1, int rows, int width) const;
  /// dfc1 from dact[rows, width] and the forward's fc1.
  void backward(tensor::tensor_view dfc1, tensor::const_tensor_view dact, tensor::const_tensor_view fc1,
                int rows, int width) const;

 private:
  bool gated_, plain_swiglu_, squared_relu_, tanh_gelu_;
  kernels::glu_options glu_;
};

}  // namespace mactor::model
