// Ring attention: context parallelism's --cp-comm-type p2p (Megatron's default, Transformer
// Engine's AttnFuncWithCPAndKVP2P). Each context-parallel rank keeps its own queries (sequence
// chunks r and 2 cp - 1 - r) and passes key/value blocks around the ring: at step s it holds
// the block of rank r - s, and the receive of the next block runs (on a helper thread) while the
// current one computes. Partial results merge by the online softmax (running max and sum, the
// log-sum-exp kept per query row for the backward). Causal masking works on global positions
// (kernels/ring_attention_block.hpp holds a block step's math, this file the ring). The tensors
// may live on a device: the block steps run there, the per-row statistics come to the host to be
// combined, and the blocks travel through host copies (the transports move host memory).
// Backward: every rank recomputes the probabilities block by block from the saved log-sum-exp;
// the keys' and values' gradients travel with their block, each rank adding its share. The ring
// runs the other way round, starting from the forward's last block (rank r + 1's, kept for it),
// so each block ends its trip at its owner: where Transformer Engine's backward hands the last
// gradients to their owner after the compute, here every transfer (the next block and the
// previous block's gradients) overlaps a step's compute. No rank holds more than three blocks at
// once (never the whole sequence's keys and values); one is kept from forward to backward. fp32 and fp64 tensors, and bf16/fp16 ones: the
// key/value blocks travel in the model's dtype (as Transformer Engine's ring sends them), each
// is widened to fp32 to compute on, the running max and sum, the partial output and every
// gradient accumulate in fp32 (the keys' and values' gradients travel in fp32: one rounding at
// the end instead of one per step), and the output and dqkv are rounded to 16 bits once; the
// log-sum-exp is fp32 (the compute type).
#pragma once
#include <cstdint>

#include "kernels/attention.hpp"
#include "model/activation_stash.hpp"
#include "model/context_parallel.hpp"
#include "model/timed_transfer.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class group;

/// Seconds spent by the last forward or backward: computing blocks, waiting for a transfer
/// after the compute (the part not hidden), and the transfers themselves (from each start
/// until it was seen done, between tiles or by the wait).
struct ring_timing : transfer_timing {
  double compute_s = 0;
};

class ring_attention {
 public:
  /// cp: the context-parallel group (size shard.cp_size, this rank at shard.cp_rank).
  ring_attention(group& cp, const sequence_shard& shard);

  /// out [rows, heads * head_dim] and lse [rows * heads] (the log-sum-exp of each query row,
  /// kept for the backward; of kernels::compute_dtype(qkv's dtype)) from qkv [rows, qkv width] (rows = local_length * batch, Megatron's
  /// fused layout). dims: heads, groups, head_dim, head_offset, total_heads, window and batch
  /// as kernels::attention_dims; dropout masks and the sink logits as kernels::attention_forward.
  void forward(tensor::tensor_view out, tensor::tensor_view lse, tensor::const_tensor_view qkv,
               const kernels::attention_dims& dims, double scale, float dropout_p,
               std::uint64_t dropout_stream, tensor::const_tensor_view sink = {});
  /// dqkv (overwritten, qkv's layout) from dout [rows, heads * head_dim] and the forward's
  /// qkv, out and lse; dsink[heads] += the sink's gradient when both are given.
  void backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                tensor::const_tensor_view qkv, tensor::const_tensor_view out,
                tensor::const_tensor_view lse, const kernels::attention_dims& dims, double scale,
                float dropout_p, std::uint64_t dropout_stream,
                tensor::const_tensor_view sink = {}, tensor::tensor_view dsink = {});

  const ring_timing& timing() const { return timing_; }
  /// The forward's last key/value block, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(last_block_); }
  void release() { last_block_ = tensor::tensor(); }

 private:
  group& cp_;
  sequence_shard shard_;
  ring_timing timing_;
  tensor::tensor last_block_;  // the forward's last block (rank r + 1's): the backward starts with it
};

}  // namespace mactor::model
