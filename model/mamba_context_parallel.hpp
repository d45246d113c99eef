// The Mamba-2 mixer under context parallelism, as Megatron-Core's MambaContextParallel runs it.
// The scan needs the whole sequence, so each context-parallel rank takes a share of the heads
// instead of the positions: an all-to-all turns in_proj's sequence-sharded x, B, C and dt into
// the whole sequence of this rank's heads (rank r: heads r * H / cp onwards, with their groups'
// B and C; where a tensor-parallel rank holds fewer groups than cp, each group's B and C go to
// every rank holding its heads), the conv and the scan run on them with the matching slices of
// conv1d, dt_bias, A_log and D, and a second all-to-all returns y to the sequence sharding.
// Megatron's load-balanced chunk order is undone on the way in and redone on the way out
// (model/ulysses_attention.hpp's exchanges). z stays where it is: the gated norm runs on this
// rank's rows, which is what Megatron's all-to-all of z there and back computes. A slice's
// gradient lands in its place of the whole parameter's gradient, to be summed over the ranks
// with the data-parallel reduction (Megatron reduces gradients over data x context parallel).
#pragma once
#include <array>
#include <cstdint>

#include "model/context_parallel.hpp"
#include "model/group.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class mamba_context_parallel {
 public:
  /// heads, groups: this tensor-parallel rank's. Throws std::invalid_argument where Megatron's
  /// MambaContextParallel asserts: the heads must divide by cp, and the groups by cp or cp by
  /// the groups. cp may be null for one rank.
  mamba_context_parallel(group* cp, const sequence_shard& shard, int heads, int groups, int head_dim, int state);

  bool active() const { return size_ > 1; }
  /// The scan's share on this rank: heads, groups, their first head, the channels of the conv.
  int heads() const { return heads_ / size_; }
  int groups() const { return groups_ < size_ ? 1 : groups_ / size_; }
  int head_offset() const { return rank_ * heads(); }
  int d_inner() const { return heads() * head_dim_; }
  int conv_dim() const { return d_inner() + 2 * groups() * state_; }
  /// The sequence length the scan runs over, given this rank's.
  int scan_seq(int local_seq) const { return local_seq * size_; }

  /// x [local rows, d_inner], B or C [local rows, groups * state], dt [local rows, heads] in
  /// [seq, batch] rows (this rank's positions) to the whole sequence of this rank's share, in
  /// [seq, batch] rows; `kind` says which.
  enum class part { x, bc, dt };
  void to_heads(part kind, int batch, tensor::const_tensor_view local, tensor::tensor_view whole) const;
  /// The reverse, for gradients and y: a B or C gradient's replicas are summed.
  void to_sequence(part kind, int batch, tensor::const_tensor_view whole, tensor::tensor_view local) const;

  /// This rank's rows [conv_dim, row_width] of the tensor-parallel rank's conv1d weight or bias
  /// (row_width: the conv width, or 1), gathered into `slice`.
  void gather_conv_rows(tensor::const_tensor_view full, tensor::tensor_view slice, int row_width) const;
  /// full += slice, placed as gather_conv_rows takes it.
  void add_conv_rows(tensor::tensor_view full, tensor::const_tensor_view slice, int row_width) const;

 private:
  struct exchange {
    std::int64_t units, width;
    int repeat;
  };
  exchange exchange_of(part kind) const;
  // The three runs of conv channels (x, B, C) this rank reads: {first row in the full, rows}.
  struct rows_run {
    std::int64_t begin, count;
  };
  std::array<rows_run, 3> conv_runs() const;

  group* cp_;
  sequence_shard shard_;
  int size_, rank_, heads_, groups_, head_dim_, state_;
};

}  // namespace mactor::model
