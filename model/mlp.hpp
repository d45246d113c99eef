// Megatron-Core's MLP: column-parallel fc1 (2 * ffn rows, [gate; up], with SwiGLU), GeLU or
// SwiGLU, row-parallel fc2 whose bias is left for bias-dropout-add.
#pragma once
#include <string>
#include <vector>

#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/tensor_parallel_linear.hpp"

namespace mactor::model {

template <typename T>
class mlp {
 public:
  /// Registers name.linear_fc1.* and name.linear_fc2.*.
  mlp(parameter_store<T>& store, const std::string& name, const gpt_model_config& config,
      int tp_size);
  /// out[rows, hidden] = all-reduced fc2(act(fc1(x))) without fc2's bias; with sequence
  /// parallelism x and out are this rank's [rows / tp, hidden] shards (rows counts the full).
  void forward(const parameter_store<T>& store, group& tp, const T* x, T* out, int rows);
  const T* fc2_bias(const parameter_store<T>& store) const { return linear_fc2_.bias(store); }
  /// dout: gradient of the biased fc2 output; dx[rows, hidden] = all-reduced input grad.
  void backward(parameter_store<T>& store, group& tp, const T* dout, const T* x, T* dx);

 private:
  bool swiglu_, tanh_gelu_;
  int ffn_local_, rows_ = 0;
  column_parallel_linear<T> linear_fc1_;
  row_parallel_linear<T> linear_fc2_;
  std::vector<T> fc1_, act_;    // saved activations
  std::vector<T> dact_, dfc1_;  // backward scratch
};

}  // namespace mactor::model
