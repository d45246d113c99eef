// Megatron-Core's MLP: column-parallel fc1 (2 * ffn rows, [gate; up], with a gated unit), GeLU,
// squared ReLU or a gated unit (SwiGLU, quick GeGLU, with the clamp and linear offset of
// Megatron's unfused glu), row-parallel fc2 whose bias is left for bias-dropout-add.
#pragma once
#include <string>

#include "model/activation_stash.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/mlp_activation.hpp"
#include "model/tensor_parallel_linear.hpp"

namespace mactor::model {

class mlp {
 public:
  /// Registers name.linear_fc1.* and name.linear_fc2.*.
  mlp(parameter_store& store, const std::string& name, const gpt_model_config& config,
      int tp_size);
  /// out[rows, hidden] = all-reduced fc2(act(fc1(x))) without fc2's bias; with sequence
  /// parallelism x and out are this rank's [rows / tp, hidden] shards (rows counts the full).
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
               tensor::tensor_view out, int rows);
  tensor::const_tensor_view fc2_bias(const parameter_store& store) const { return linear_fc2_.bias(store); }
  /// dout: gradient of the biased fc2 output; dx[rows, hidden] = all-reduced input grad.
  /// With selective mlp recomputation the forward keeps nothing and the backward reruns fc1 and
  /// the activation from x.
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                tensor::const_tensor_view x, tensor::tensor_view dx);
  /// Frees every saved activation and scratch buffer.
  void release();
  /// The state the backward reads from the last forward, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(fc1_, act_, rows_); }

 private:
  /// fc1_ = fc1(x), act_ = act(fc1_).
  void forward_inner(const parameter_store& store, group& tp, tensor::const_tensor_view x);

  mlp_activation activation_;
  bool recompute_;
  int ffn_local_, rows_ = 0;
  column_parallel_linear linear_fc1_;
  row_parallel_linear linear_fc2_;
  tensor::tensor fc1_, act_;    // saved activations
  tensor::tensor dact_, dfc1_;  // backward scratch
};

}  // namespace mactor::model
