// Megatron's tensor-parallel linear layers. Column-parallel: the weight's output rows are split,
// the input is replicated, the input gradient is all-reduced. Row-parallel: the weight's input
// columns are split, the output is all-reduced, the bias (replicated) is left to the caller to
// add after the reduction (Megatron's skip_bias_add, fused into bias-dropout-add).
#pragma once
#include <string>

#include "model/group.hpp"
#include "model/parameter.hpp"

namespace mactor::model {

template <typename T>
class column_parallel_linear {
 public:
  /// Registers name.weight [out, in] (and name.bias [out]); split is rows or row_halves.
  column_parallel_linear(parameter_store<T>& store, const std::string& name, int in, int out,
                         bool bias, tp_split split, double init_std, int tp_size);
  int out_local() const { return out_local_; }
  /// y[rows, out_local] = x[rows, in] W^T + b
  void forward(const parameter_store<T>& store, const T* x, T* y, int rows) const;
  /// dW += dy^T x, db += colsum(dy), dx[rows, in] = all_reduce(dy W).
  void backward(parameter_store<T>& store, group& tp, const T* dy, const T* x, T* dx,
                int rows) const;

 private:
  int weight_, bias_ = -1, in_, out_local_;
};

template <typename T>
class row_parallel_linear {
 public:
  /// Registers name.weight [out, in] (columns split) and name.bias [out] (replicated).
  row_parallel_linear(parameter_store<T>& store, const std::string& name, int in, int out,
                      bool bias, double init_std, int tp_size);
  int in_local() const { return in_local_; }
  /// y[rows, out] = all_reduce(x[rows, in_local] W^T), without the bias.
  void forward(const parameter_store<T>& store, group& tp, const T* x, T* y, int rows) const;
  /// The bias to add after the reduction, or null.
  const T* bias(const parameter_store<T>& store) const {
    return bias_ < 0 ? nullptr : store.value(bias_);
  }
  /// dy: gradient of the biased output. db += colsum(dy), dW += dy^T x, dx = dy W.
  void backward(parameter_store<T>& store, const T* dy, const T* x, T* dx, int rows) const;

 private:
  int weight_, bias_ = -1, in_local_, out_;
};

}  // namespace mactor::model
