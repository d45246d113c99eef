// Ring attention's math on one key/value block (ring_attention.hpp drives the ring): the online
// softmax forward and the recomputing backward of this rank's queries against one rank's keys
// and values. Each (query chunk, key chunk) pair is a tile computed with GEMMs per (batch row,
// head): the scores S = scale Q K^T, the causal and sliding-window mask on global positions, the
// softmax's exponentials, then P V (forward) or dV += P^T dO, dQ += dS K, dK += dS^T Q
// (backward). Chunk pairs with every key after every query are skipped.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention.hpp"
#include "model/context_parallel.hpp"

namespace mactor::model::ring_blocks {

/// The index arithmetic of one rank's queries and of one key/value block. A block holds, per
/// (local position, batch row, group), the key head then the value head: [rows, groups, 2, hd].
struct layout {
  const kernels::attention_dims& d;
  sequence_shard shard;
  int per_group() const { return d.heads / d.groups; }
  std::int64_t width() const { return d.qkv_width(); }
  std::int64_t block_numel() const {
    return std::int64_t(shard.local_length()) * d.batch * d.groups * 2 * d.head_dim;
  }
  /// Offset of head h's query in qkv row r; of group g's key in qkv row r.
  std::int64_t q_at(std::int64_t r, int h) const {
    const int g = h / per_group();
    return r * width() + (std::int64_t(g) * (per_group() + 2) + h % per_group()) * d.head_dim;
  }
  std::int64_t k_at(std::int64_t r, int g) const {
    return r * width() + (std::int64_t(g) * (per_group() + 2) + per_group()) * d.head_dim;
  }
  /// Offset of group g's key in block row r (its value follows at + head_dim).
  std::int64_t block_at(std::int64_t r, int g) const { return (r * d.groups + g) * 2 * d.head_dim; }
  /// Index of (row r, head h) in the per-row-and-head arrays (m, l, lse, delta; x hd for o, dq).
  std::int64_t row_head(std::int64_t r, int h) const { return r * d.heads + h; }
};

/// Attention dropout's keep-and-rescale factor of (batch row, head, query position, key
/// position): the element kernels::attention_forward draws for it on one rank.
struct dropout_mask {
  float p;
  std::uint64_t stream;
  const kernels::attention_dims& d;
  std::uint64_t seq;
  /// z[j] = factor(b, h, qpos, kpos + j) for j in [0, n): one tight loop over consecutive mask
  /// elements (a per-element call costs the tiles more than their GEMMs at short chunks).
  template <typename T>
  void factors(T* z, int b, int h, int qpos, int kpos, int n) const;
};

/// The online softmax's state of every (query row, head): running max, sum and unnormalized out.
template <typename T>
struct forward_state {
  std::vector<T> m, l, o;
};

/// Per query row and head: its log-sum-exp, dout . out (the softmax backward's row term) and
/// the gradient it accumulates for its query.
template <typename T>
struct backward_rows {
  const T* lse;
  std::vector<T> delta, dq;
};

/// What the caller does between tiles (move a block transfer along): called after each tile
/// by one thread of the team, never concurrently; may be empty.
using between_tiles = std::function<void()>;

/// Folds `owner`'s block (keys and values) into the online softmax state of this rank's queries.
template <typename T>
void forward_block(forward_state<T>& st, const T* qkv, const T* block, int owner, const layout& L, T scale,
                   const dropout_mask& drop, const between_tiles& between = {});

/// Adds this block's share to rows.dq and to dblock (the block's key and value gradients, the
/// block's layout), recomputing the probabilities from rows.lse.
template <typename T>
void backward_block(backward_rows<T>& rows, T* dblock, const T* dout, const T* qkv, const T* block, int owner,
                    const layout& L, T scale, const dropout_mask& drop, const between_tiles& between = {});

}  // namespace mactor::model::ring_blocks
