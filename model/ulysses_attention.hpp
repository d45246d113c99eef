// Ulysses attention: context parallelism's --cp-comm-type a2a (Megatron hands it to Transformer
// Engine's AttnFuncWithCPAndQKVOA2A). One all-to-all over the context-parallel group turns this
// rank's sequence-sharded qkv [local positions, batch, groups, ...] into a head-sharded one
// [whole sequence, batch, groups / cp, ...] (rank r gets query groups r * groups / cp onwards,
// with their query heads), each rank runs the ordinary causal attention on the whole sequence
// for its heads, and a second all-to-all returns the context to the sequence sharding. The
// backward runs the same exchanges on the gradients. Query groups (per tensor-parallel rank)
// must divide by cp. Any dtype (the exchanges move bytes; the kernel widens 16-bit ones).
#pragma once
#include <cstdint>

#include "kernels/attention.hpp"
#include "model/activation_stash.hpp"
#include "model/context_parallel.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class group;

class ulysses_attention {
 public:
  /// cp: the context-parallel group (size shard.cp_size, this rank at shard.cp_rank); groups:
  /// the query groups held here (tensor-parallel shard), divisible by cp (else invalid_argument).
  ulysses_attention(group& cp, const sequence_shard& shard, int groups);

  /// out [rows, heads * head_dim] from qkv [rows, qkv width] (rows = local_length * batch);
  /// dims: heads, groups, head_dim, head_offset, total_heads, window and batch as
  /// kernels::attention_dims. Keeps the head-sharded qkv and probabilities for the backward.
  void forward(tensor::tensor_view out, tensor::const_tensor_view qkv, const kernels::attention_dims& dims,
               double scale, float dropout_p, std::uint64_t dropout_stream, tensor::const_tensor_view sink = {});
  /// dqkv (overwritten) from dout [rows, heads * head_dim]; dsink[heads] += the sink's gradient
  /// for this rank's heads when both are given.
  void backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout, const kernels::attention_dims& dims,
                double scale, float dropout_p, std::uint64_t dropout_stream, tensor::const_tensor_view sink = {},
                tensor::tensor_view dsink = {});
  void release();
  /// The forward's head-sharded qkv and probabilities, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(qkv_heads_, probs_); }

 private:
  group& cp_;
  sequence_shard shard_;
  tensor::tensor qkv_heads_, probs_;  // the forward's head-sharded qkv and probabilities

  /// The dims of this rank's heads over the whole sequence.
  kernels::attention_dims head_dims(const kernels::attention_dims& local) const;
};

/// The dims of heads shard `index` of `shards` (query groups and their heads split evenly) of
/// `local`'s, on `seq` positions of keys and queries alike (no runs: causal on those positions).
kernels::attention_dims head_shard_dims(const kernels::attention_dims& local, int shards, int index, int seq);

/// The exchanges over g, whose member m holds context-parallel rank shard.cp_rank - g.rank() + m's
/// positions (the whole context-parallel group for a2a; a2a+p2p's group of consecutive ranks):
/// in [local rows, units, unit_width] (sequence-sharded, this rank's positions) to
/// out [target rows, units / g.size(), unit_width] (this rank's units at the target's positions
/// in its row order: the whole sequence for a2a, the ring's shard for a2a+p2p), and back.
/// The target holds g.size() times this rank's positions: every member's.
void sequence_to_heads(group& g, const sequence_shard& shard, const sequence_shard& target, int batch,
                       std::int64_t units, std::int64_t unit_width, tensor::const_tensor_view in,
                       tensor::tensor_view out);
void heads_to_sequence(group& g, const sequence_shard& shard, const sequence_shard& target, int batch,
                       std::int64_t units, std::int64_t unit_width, tensor::const_tensor_view in,
                       tensor::tensor_view out);
/// The exchanges over the whole context-parallel group cp, to and from the whole sequence.
inline void sequence_to_heads(group& cp, const sequence_shard& shard, int batch, std::int64_t units,
                              std::int64_t unit_width, tensor::const_tensor_view in, tensor::tensor_view out) {
  sequence_to_heads(cp, shard, {shard.seq_length, 1, 0}, batch, units, unit_width, in, out);
}
inline void heads_to_sequence(group& cp, const sequence_shard& shard, int batch, std::int64_t units,
                              std::int64_t unit_width, tensor::const_tensor_view in, tensor::tensor_view out) {
  heads_to_sequence(cp, shard, {shard.seq_length, 1, 0}, batch, units, unit_width, in, out);
}

}  // namespace mactor::model
