// The shape of one attention core call (kernels/attention.hpp), apart so that the CUDA kernels
// (kernels/cuda/attention.hpp) take the same description without the tensor headers.
#pragma once
#include <array>
#include <cstdint>

namespace mactor::kernels {

/// Rows [local, local + length) of the queries here are positions [global, global + length).
struct query_run {
  int local = 0;
  int global = 0;
  int length = 0;
};

struct attention_dims {
  int seq = 0;       // query rows here (the whole sequence without context parallelism)
  int batch = 0;
  int heads = 0;     // query heads held here (this tensor-parallel shard)
  int groups = 0;    // key/value heads held here; heads % groups == 0
  int head_dim = 0;  // kv_channels
  int head_offset = 0;  // global index of the first head here (dropout mask indices)
  int total_heads = 0;  // global number of query heads (dropout mask indices)
  int window = -1;      // sliding window: query i sees keys [i - window, i]; -1: every key <= i
  /// Document mask (--reset-attention-mask): [batch, keys], the first key position the query at
  /// each position sees (non-decreasing along a sequence, at most the position); null: 0.
  const std::int32_t* document_start = nullptr;
  int kv_seq = 0;       // key rows (the whole sequence); 0: seq
  std::array<query_run, 2> runs{};  // the query rows' positions; num_runs = 0: rows 0..seq
  int num_runs = 0;
  int keys() const { return kv_seq > 0 ? kv_seq : seq; }
  std::int64_t qkv_width() const {
    return std::int64_t(groups) * (heads / groups + 2) * head_dim;
  }
};

}  // namespace mactor::kernels
