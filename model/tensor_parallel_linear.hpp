// Megatron's tensor-parallel linear layers. Column-parallel: the weight's output rows are split,
// the input is replicated, the input gradient is all-reduced. Row-parallel: the weight's input
// columns are split, the output is all-reduced, the bias (replicated) is left to the caller to
// add after the reduction (Megatron's skip_bias_add, fused into bias-dropout-add).
// With sequence parallelism the input of a column-parallel linear arrives as this rank's
// sequence shard and is all-gathered (its gradient reduce-scattered back), and a row-parallel
// linear reduce-scatters its output to the shard (and all-gathers the output gradient). Rows are
// in [seq, batch] order, so shard r is the contiguous block of rows [r * rows / tp, ...).
// Under fp8 (a non-empty fp8_settings) the GEMMs run through model/fp8_linear.
#pragma once
#include <memory>
#include <string>

#include "model/fp8_linear.hpp"
#include "model/group.hpp"
#include "model/parameter.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class column_parallel_linear {
 public:
  /// Registers name.weight [out, in] (and name.bias [out]); split is rows or row_halves.
  column_parallel_linear(parameter_store& store, const std::string& name, int in, int out,
                         bool bias, tp_split split, double init_std, int tp_size,
                         bool sequence_parallel = false, const fp8_settings& fp8 = {});
  int out_local() const { return out_local_; }
  /// The weight's parameter id (a caller may give a row_segments weight its segments).
  int weight_id() const { return weight_; }
  /// y[rows, out_local] = x[rows, in] W^T + b. With sequence parallelism x is this rank's
  /// [rows / tp, in] shard; the gathered input is kept for backward.
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x, tensor::tensor_view y, int rows);
  /// dW += dy^T x, db += colsum(dy), dx[rows, in] = all_reduce(dy W) (sequence parallel:
  /// dx[rows / tp, in] = reduce_scatter(dy W), x the shard given to the forward, gathered again
  /// as Megatron does rather than kept whole).
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view dy, tensor::const_tensor_view x, tensor::tensor_view dx, int rows);
  /// Frees the scratch (gathered input, full input gradient); the next call allocates it again.
  void release();

 private:
  int weight_, bias_ = -1, in_, out_local_;
  bool sequence_parallel_;
  tensor::tensor gathered_, scratch_;  // scratch: the all-gathered input; the full input gradient
  std::unique_ptr<fp8_linear> fp8_;    // null unless the layer runs in fp8
};

class row_parallel_linear {
 public:
  /// Registers name.weight [out, in] (columns split) and name.bias [out] (replicated).
  row_parallel_linear(parameter_store& store, const std::string& name, int in, int out,
                      bool bias, double init_std, int tp_size, bool sequence_parallel = false,
                      const fp8_settings& fp8 = {});
  int in_local() const { return in_local_; }
  /// y[rows, out] = all_reduce(x[rows, in_local] W^T), without the bias (sequence parallel:
  /// y[rows / tp, out] = reduce_scatter(x W^T)).
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x, tensor::tensor_view y, int rows);
  /// The bias to add after the reduction, or an empty view.
  tensor::const_tensor_view bias(const parameter_store& store) const { return store.value(bias_); }
  /// dy: gradient of the biased output ([rows / tp, out] with sequence parallelism, all-gathered
  /// here). db += colsum(dy) (a partial sum under sequence parallelism), dW += dy^T x, dx = dy W.
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view dy, tensor::const_tensor_view x, tensor::tensor_view dx, int rows);
  /// Frees the scratch (the output before its reduce-scatter, the gathered gradient).
  void release();

 private:
  int weight_, bias_ = -1, in_local_, out_;
  bool sequence_parallel_;
  tensor::tensor full_;  // the output before its reduce-scatter, or the gathered gradient
  std::unique_ptr<fp8_linear> fp8_;  // null unless the layer runs in fp8
};

}  // namespace mactor::model
