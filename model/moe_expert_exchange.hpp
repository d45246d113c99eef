// The all-to-all of Megatron-Core's alltoall token dispatcher across expert-parallel ranks:
// each rank's permuted rows (in global expert order) go to the ranks owning their experts, and
// arrive sorted by local expert, then by source rank (Megatron's sort_chunks_by_idxs); the
// experts' outputs travel the reverse way. With one expert-parallel rank it is a copy.
#pragma once
#include <cstdint>
#include <vector>

#include "model/activation_stash.hpp"
#include "model/group.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class moe_expert_exchange {
 public:
  /// ep: the expert-parallel group; its rank r owns experts [r * L, (r + 1) * L),
  /// L = num_experts / ep.size().
  moe_expert_exchange(int num_experts, group& ep);
  /// Learns every rank's rows per global expert (an all-gather of the counts over ep) from this
  /// rank's, and plans both directions.
  void plan(const std::vector<std::int64_t>& tokens_per_expert);
  /// Rows each local expert receives, from all ranks.
  const std::vector<std::int64_t>& local_tokens_per_expert() const { return local_counts_; }
  std::int64_t received_rows() const { return std::int64_t(sort_.size()); }
  /// out[received_rows, width], by local expert then source rank, from this rank's
  /// in[permuted rows, width] in global expert order.
  void to_experts(tensor::const_tensor_view in, tensor::tensor_view out, std::int64_t width);
  /// The reverse: out[permuted rows, width] in global expert order from in[received_rows, width].
  void from_experts(tensor::const_tensor_view in, tensor::tensor_view out, std::int64_t width);
  /// The last plan (counts and row orders), into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(send_rows_, recv_rows_, local_counts_, sort_, unsort_); }

 private:
  group& ep_;
  int experts_, local_;
  std::vector<std::int64_t> send_rows_, recv_rows_, local_counts_;
  std::vector<std::int64_t> sort_;    // expert-ordered row i is received row sort_[i]
  std::vector<std::int64_t> unsort_;  // received row j is expert-ordered row unsort_[j]
  tensor::tensor buffer_;             // the rows as the all-to-all moves them
};

}  // namespace mactor::model
