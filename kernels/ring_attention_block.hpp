// Ring attention's math on one key/value block (model/ring_attention.hpp drives the ring): the
// online-softmax forward and the recomputing backward of this rank's queries against one rank's
// keys and values. On the CPU each (query chunk, key chunk) pair is a tile computed with GEMMs
// per (batch row, head): the scores S = scale Q K^T, the causal and sliding-window mask on global
// positions, the softmax's exponentials, then P V (forward) or dV += P^T dO, dQ += dS K,
// dK += dS^T Q (backward). Chunk pairs with every key after every query are skipped. A device
// backend computes the same sums in its own order (kernels/cuda/ring_attention_block.hpp).
#pragma once
#include <cstdint>
#include <functional>

#include "kernels/ring_block_dims.hpp"
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// What the caller does between tiles on the host (move a block transfer along): called after
/// each tile by one thread, never concurrently; may be empty. Device backends do not call it
/// (their kernels run while the host drives the transfer).
using between_tiles = std::function<void()>;

/// Folds the block's keys and values into the online-softmax state of this rank's queries:
/// m (running max) and l (running sum) [rows * heads], o (unnormalized output) [rows * heads *
/// head_dim], all of the compute type of qkv's dtype (kernels::compute_dtype); qkv [rows, qkv
/// width] and block [rows, groups, 2, head_dim] in the model's dtype (rows = r.rows()).
/// Attention dropout keeps element (b, global head, query position, key position) of
/// dropout_stream, as kernels::attention_forward draws it.
void ring_block_forward(tensor::tensor_view m, tensor::tensor_view l, tensor::tensor_view o,
                        tensor::const_tensor_view qkv, tensor::const_tensor_view block, const ring_block_dims& r,
                        double scale, float dropout_p, std::uint64_t dropout_stream,
                        const between_tiles& between = {});

/// Adds the block's share to dq [rows * heads * head_dim] and to dblock (the block's key and
/// value gradients, the block's layout), recomputing the probabilities from lse [rows * heads];
/// delta [rows * heads] is dout . out per row and head. dq, dblock, lse and delta are of the
/// compute type; dout [rows, heads * head_dim], qkv and block of the model's dtype.
void ring_block_backward(tensor::tensor_view dq, tensor::tensor_view dblock, tensor::const_tensor_view dout,
                         tensor::const_tensor_view qkv, tensor::const_tensor_view block,
                         tensor::const_tensor_view lse, tensor::const_tensor_view delta, const ring_block_dims& r,
                         double scale, float dropout_p, std::uint64_t dropout_stream,
                         const between_tiles& between = {});

}  // namespace mactor::kernels
