// A normalization module (LayerNorm with bias, or RMSNorm) holding its weights and the
// statistics its backward needs. Weights are replicated across tensor-parallel ranks.
#pragma once
#include <string>

#include "model/activation_stash.hpp"
#include "model/gpt_model_config.hpp"
#include "model/parameter.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class norm {
 public:
  /// Registers name.weight [hidden] (ones, or zeros with apply_layernorm_1p) and, for
  /// LayerNorm, name.bias [hidden].
  norm(parameter_store& store, const std::string& name, const gpt_model_config& config);
  /// A norm over `width` features (--qk-layernorm's per-head norms, width = kv_channels) whose
  /// weights each tensor-parallel rank uses on its own heads: their gradients are partial sums
  /// over the tensor-parallel group (Megatron's finalize_model_grads sums them).
  norm(parameter_store& store, const std::string& name, const gpt_model_config& config, int width);
  /// The norm Transformer Engine fuses into the linear `linear` (TELayerNormColumnParallelLinear,
  /// as Megatron's mamba_stack_spec builds its layers): linear.layer_norm_weight and, for
  /// LayerNorm, linear.layer_norm_bias.
  static norm fused_into(parameter_store& store, const std::string& linear, const gpt_model_config& config);
  /// y[rows, hidden] = norm(x); keeps the row statistics.
  void forward(const parameter_store& store, tensor::const_tensor_view x, tensor::tensor_view y,
               int rows);
  /// dx (= or += when accumulate) and the weight gradients, from the last forward's statistics.
  /// While the store's weight_grads() collect (a zero-bubble backward), the weight gradients are
  /// left to its W pass.
  void backward(parameter_store& store, tensor::const_tensor_view dy, tensor::const_tensor_view x,
                tensor::tensor_view dx, int rows, bool accumulate);
  /// Frees the statistics.
  void release() { mean_ = tensor::tensor(), rstd_ = tensor::tensor(); }
  /// The state the backward reads from the last forward, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(mean_, rstd_); }

 private:
  normalization_kind kind_;
  double eps_;
  bool one_p_;
  int hidden_, weight_, bias_ = -1;
  norm(parameter_store& store, const std::string& weight_name, const std::string& bias_name,
       const gpt_model_config& config);
  /// The backward's kernel from the given statistics: dx when not empty, the weight gradients
  /// when `weights`.
  void gradients(parameter_store& store, tensor::const_tensor_view dy, tensor::const_tensor_view x,
                 tensor::const_tensor_view mean, tensor::const_tensor_view rstd, tensor::tensor_view dx, int rows,
                 bool accumulate, bool weights) const;
  tensor::tensor mean_, rstd_;
};

}  // namespace mactor::model
