// The experts' tensor-parallel exchange (Megatron's alltoall dispatcher with
// --expert-tensor-parallel-size > 1): each expert is split over the expert-tensor-parallel ranks
// (fc1 by rows, fc2 by columns), so every rank of that group must run every token that any of
// them received for its local experts. The rows are all-gathered over the group (by local
// expert, then by source rank, as Megatron's sort_chunks_by_idxs orders them), the experts run
// on their shard of the weights, and the partial outputs are summed back onto the rank that
// received each row (a reduce-scatter of unequal blocks). Gradients flow the opposite way.
#pragma once
#include <cstdint>
#include <vector>

#include "model/activation_stash.hpp"
#include "model/group.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class moe_expert_tensor_exchange {
 public:
  /// etp: the experts' tensor-parallel group; local_experts: the experts each rank holds a
  /// shard of (the same ones on every rank of the group).
  moe_expert_tensor_exchange(group& etp, int local_experts);
  /// Learns every rank's rows per local expert (an all-gather of the counts) from this rank's.
  void plan(const std::vector<std::int64_t>& tokens_per_expert);
  /// Rows per local expert over the whole group: what the expert shards run on.
  const std::vector<std::int64_t>& gathered_tokens_per_expert() const { return gathered_counts_; }
  std::int64_t gathered_rows() const { return std::int64_t(order_.size()); }
  /// out[gathered_rows, width], by local expert then rank, from every rank's in[rows, width]
  /// (its rows in local expert order).
  void gather(tensor::const_tensor_view in, tensor::tensor_view out, std::int64_t width);
  /// out[rows, width] = the sum over the group's ranks of their in[gathered_rows, width] at
  /// this rank's rows, added in rank order.
  void scatter_sum(tensor::const_tensor_view in, tensor::tensor_view out, std::int64_t width);
  /// The last plan (counts and row orders), into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(rows_of_, gathered_counts_, order_, unorder_); }

 private:
  group& etp_;
  int local_;
  std::vector<std::int64_t> rows_of_, gathered_counts_;  // rows per rank; per local expert
  std::vector<std::int64_t> order_;  // gathered row i is received (rank-blocked) row order_[i]
  std::vector<std::int64_t> unorder_;  // the inverse
  tensor::tensor sent_, received_;
};

}  // namespace mactor::model
