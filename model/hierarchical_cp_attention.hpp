// Hierarchical context parallelism: --cp-comm-type a2a+p2p with
// --hierarchical-context-parallel-sizes a p (Transformer Engine's AttnFuncWithCPAndKVP2P given
// Megatron's two hierarchical groups). The context-parallel ranks form groups of a consecutive
// ranks (level 0, Megatron's create_hierarchical_groups) and rings of the p ranks at the same
// place in each (level 1). An all-to-all inside the level-0 group swaps sequence for head
// sharding, as a2a does over the whole group: rank j * a + i then holds 1 / a of the heads on
// the positions of its whole group, which are chunks j and 2 p - 1 - j of the sequence cut in
// 2 p (TE reorders the exchanged chunks so; see sequence_to_heads' target). Ring attention
// (model/ring_attention.hpp) runs on those over the level-1 ring, and a second all-to-all
// returns the context to the sequence sharding. The backward runs the same exchanges on the
// gradients around the ring's backward. Query groups per tensor-parallel rank must divide by a.
#pragma once
#include <cstdint>

#include "kernels/attention.hpp"
#include "model/activation_stash.hpp"
#include "model/context_parallel.hpp"
#include "model/ring_attention.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class group;

class hierarchical_cp_attention {
 public:
  /// a2a: the level-0 group (a consecutive context-parallel ranks); p2p: the level-1 ring;
  /// shard: this rank's place in the whole context-parallel group (size a * p, at j * a + i);
  /// groups: the query groups held here, divisible by a (else invalid_argument).
  hierarchical_cp_attention(group& a2a, group& p2p, const sequence_shard& shard, int groups);

  /// out [rows, heads * head_dim] from qkv [rows, qkv width] (rows = local_length * batch;
  /// dims as kernels::attention_dims). Keeps the head-sharded qkv, context and log-sum-exp.
  void forward(tensor::tensor_view out, tensor::const_tensor_view qkv, const kernels::attention_dims& dims,
               double scale, float dropout_p, std::uint64_t dropout_stream, tensor::const_tensor_view sink = {});
  /// dqkv (overwritten) from dout [rows, heads * head_dim]; dsink[heads] += the sink's gradient
  /// for this rank's heads when both are given.
  void backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout, const kernels::attention_dims& dims,
                double scale, float dropout_p, std::uint64_t dropout_stream, tensor::const_tensor_view sink = {},
                tensor::tensor_view dsink = {});
  void release();
  /// The forward's head-sharded tensors, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) {
    s.carry(qkv_heads_, context_heads_, lse_);
    ring_.carry(s);
  }

  const ring_timing& timing() const { return ring_.timing(); }

 private:
  group& a2a_;
  sequence_shard shard_;       // this rank's positions in the whole context-parallel group
  sequence_shard ring_shard_;  // its level-0 group's positions: the ring's chunks
  ring_attention ring_;
  tensor::tensor qkv_heads_, context_heads_, lse_;  // the forward's, head-sharded

  /// The dims of this rank's heads on its level-0 group's positions.
  kernels::attention_dims head_dims(const kernels::attention_dims& local) const;
};

}  // namespace mactor::model
