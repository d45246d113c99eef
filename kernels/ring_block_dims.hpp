// The shape of one ring-attention block step (kernels/ring_attention_block.hpp), apart so that the
// CUDA kernels take the same description without the tensor headers. Context parallelism gives
// each rank two sequence chunks (r and 2 cp - 1 - r); a step puts this rank's queries against the
// keys and values of one rank's chunks (the block), with causal masking on global positions.
#pragma once
#include <array>
#include <cstdint>

#include "kernels/attention_dims.hpp"

namespace mactor::kernels {

struct ring_block_dims {
  /// heads, groups, head_dim, head_offset, total_heads, window and batch as the attention core
  /// reads them (seq, runs and document_start are not used: the fields below place the rows).
  attention_dims d;
  int local_length = 0;  ///< positions per rank: this rank's queries, and the block's keys
  int seq_length = 0;    ///< the whole sequence (the dropout mask's indices)
  std::array<query_run, 2> queries{};  ///< this rank's local rows and their positions
  std::array<query_run, 2> keys{};     ///< the block owner's
  int num_queries = 0;
  int num_keys = 0;

  int per_group() const { return d.heads / d.groups; }
  /// Rows of queries (and of the block): local_length * batch, row = position * batch + b.
  std::int64_t rows() const { return std::int64_t(local_length) * d.batch; }
  std::int64_t qkv_width() const { return d.qkv_width(); }
  /// A block holds, per (row, group), the key head then the value head: [rows, groups, 2, hd].
  std::int64_t block_numel() const { return rows() * d.groups * 2 * d.head_dim; }
  /// Offset of head h's query in qkv row r; of group g's key in qkv row r (its value follows).
  std::int64_t q_at(std::int64_t r, int h) const {
    const int g = h / per_group();
    return r * qkv_width() + (std::int64_t(g) * (per_group() + 2) + h % per_group()) * d.head_dim;
  }
  std::int64_t k_at(std::int64_t r, int g) const {
    return r * qkv_width() + (std::int64_t(g) * (per_group() + 2) + per_group()) * d.head_dim;
  }
  /// Offset of group g's key in block row r (its value follows at + head_dim).
  std::int64_t block_at(std::int64_t r, int g) const { return (r * d.groups + g) * 2 * d.head_dim; }
  /// Index of (row r, head h) in the per-row-and-head arrays (m, l, lse, delta; x head_dim for o, dq).
  std::int64_t row_head(std::int64_t r, int h) const { return r * d.heads + h; }
};

}  // namespace mactor::kernels
