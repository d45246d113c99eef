// Megatron-Core's L2Norm (torch_norm.py), which --qk-l2-norm puts in the attention's q_layernorm
// and k_layernorm slots: y = x * rsqrt(mean(x^2) + eps) over the last dimension, computed in fp32
// and rounded once to x's dtype. It has no parameters.
#pragma once

#include "model/activation_stash.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class l2_norm {
 public:
  /// A norm over `width` features (kv_channels for the query and key heads); eps is
  /// --norm-epsilon, as Megatron's attention builds its q/k norms with layernorm_epsilon.
  l2_norm(int width, double eps) : width_(width), eps_(eps) {}
  /// y[rows, width] = L2Norm(x); keeps each row's rsqrt for the backward.
  void forward(tensor::const_tensor_view x, tensor::tensor_view y, int rows);
  /// dx[rows, width] (= or += when accumulate), from the last forward's statistics.
  void backward(tensor::const_tensor_view dy, tensor::const_tensor_view x, tensor::tensor_view dx, int rows,
                bool accumulate);
  /// Frees the statistics.
  void release() { rstd_ = tensor::tensor(); }
  /// The state the backward reads from the last forward, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(rstd_); }

 private:
  int width_;
  double eps_;
  tensor::tensor rstd_;
  // RMSNorm's kernels with a zero-centered gamma of zeros (a scale of exactly 1) compute L2Norm;
  // the gamma gradient they also produce goes to scratch.
  tensor::tensor zeros_, dgamma_;
  tensor::const_tensor_view unit_scale(tensor::dtype type);
};

}  // namespace mactor::model
