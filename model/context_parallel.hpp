// Megatron's context parallelism as the model sees it. The sequence is cut into 2 * cp chunks and
// context-parallel rank r holds chunks r and 2 * cp - 1 - r (Megatron's get_batch_on_this_cp_rank),
// so every rank has the same causal attention work. Each layer runs on those positions only;
// attention reaches the other ranks' keys and values as --cp-comm-type says: p2p passes them
// around the ring (model/ring_attention.hpp), a2a swaps sequence for head sharding
// (model/ulysses_attention.hpp), a2a+p2p does the one inside groups and the other between them
// (model/hierarchical_cp_attention.hpp), allgather (below) all-gathers the whole sequence's and
// reduce-scatters their gradients back. Row placements keep the dropout masks of one
// rank: a row's mask is that of its position in the whole [seq, batch, hidden] tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class group;

/// --cp-comm-type: how attention reaches the other ranks' keys and values.
///   allgather: all-gather the whole sequence's keys and values (reduce-scatter their gradients);
///   p2p: ring attention (model/ring_attention.hpp), blocks passed around the ring;
///   a2a: Ulysses (model/ulysses_attention.hpp), all-to-all from sequence to head sharding;
///   a2a_p2p: a2a inside groups of consecutive ranks, p2p between them
///   (model/hierarchical_cp_attention.hpp; the groups are the context-parallel group's levels()).
enum class cp_comm_kind { p2p, a2a, allgather, a2a_p2p };

/// The sequence positions a context-parallel rank holds, in its row order.
struct sequence_shard {
  int seq_length = 0;  ///< the whole sequence
  int cp_size = 1;
  int cp_rank = 0;

  int local_length() const { return seq_length / cp_size; }
  /// Local positions and their global ones: [0, seq) at cp = 1, else the two chunks.
  std::vector<kernels::query_run> runs() const;
  /// The global position of each local position, in row order.
  std::vector<int> positions() const;
};

/// Where rows [first_row, first_row + rows) of a rank's [local_length * batch, hidden]
/// activation sit in the one-rank [seq * batch, hidden] tensor (first_row: a sequence-parallel
/// shard's start); the dropout calls below give each row its one-rank mask.
class row_placement {
 public:
  row_placement() = default;
  row_placement(const sequence_shard& shard, int batch, std::int64_t first_row, std::int64_t rows);

  /// kernels::dropout_apply over the rows (y and x: [rows, hidden]).
  void dropout_apply(tensor::tensor_view y, tensor::const_tensor_view x, int hidden, float p,
                     std::uint64_t stream) const;
  /// kernels::bias_dropout_add over the rows.
  void bias_dropout_add(tensor::tensor_view out, tensor::const_tensor_view residual,
                        tensor::const_tensor_view x, tensor::const_tensor_view bias, int hidden,
                        float p, std::uint64_t stream) const;

 private:
  struct span {
    std::int64_t row = 0;         // first row, relative to first_row
    std::int64_t global_row = 0;  // its row in the one-rank tensor
    std::int64_t rows = 0;
  };
  std::vector<span> spans_;
};

/// whole[seq * batch] (sequence order) = every context-parallel rank's local[local_length * batch]
/// values of `element` bytes each, exchanged over cp (every rank gets the whole sequence).
void gather_sequence_values(group& cp, const sequence_shard& shard, int batch, const void* local, std::size_t element,
                            void* whole);
/// The whole sequence's values (token ids, labels, loss masks) of every context-parallel rank.
template <typename T>
std::vector<T> gather_sequence_values(group& cp, const sequence_shard& shard, int batch, const std::vector<T>& local) {
  std::vector<T> whole(std::size_t(shard.seq_length) * std::size_t(batch));
  gather_sequence_values(cp, shard, batch, local.data(), sizeof(T), whole.data());
  return whole;
}
/// This rank's rows of whole[seq * batch] (sequence order), in its row order.
template <typename T>
std::vector<T> local_values(const sequence_shard& shard, int batch, const std::vector<T>& whole) {
  std::vector<T> out;
  out.reserve(std::size_t(shard.local_length()) * std::size_t(batch));
  for (const int p : shard.positions())
    for (int b = 0; b < batch; ++b) out.push_back(whole[std::size_t(p) * std::size_t(batch) + std::size_t(b)]);
  return out;
}

/// full[seq * batch, width] (sequence order) = every context-parallel rank's
/// local[local_length * batch, width], all-gathered over cp.
void gather_sequence(group& cp, const sequence_shard& shard, int batch,
                     tensor::const_tensor_view local, tensor::tensor_view full);
/// local = this rank's rows of the sum over the context-parallel ranks of full (the reverse).
void reduce_scatter_sequence(group& cp, const sequence_shard& shard, int batch,
                             tensor::const_tensor_view full, tensor::tensor_view local);

}  // namespace mactor::model
