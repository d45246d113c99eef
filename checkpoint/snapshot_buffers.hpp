// The buffers a rank's checkpoint snapshots are copied into, recycled from one save to the next.
// A snapshot is the rank's whole state (a local checkpoint: parameters and optimizer moments), and
// training waits while it is copied. Copying into fresh memory costs the kernel a page fault per
// page on top of the copy (measured here: 48 ms for 96 MiB fresh, 13 ms into mapped pages), so
// the checkpointer hands each written snapshot's buffers back and the next capture copies into
// them: Megatron's async and local checkpoints keep their host buffers the same way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "checkpoint/tensor_piece.hpp"

namespace mactor::checkpoint {

class snapshot_buffers {
 public:
  /// src[0, n) in a buffer of exactly n elements: a returned one of that size when one is free,
  /// a new one otherwise. Thread-safe.
  std::vector<float> copy(const float* src, std::size_t n);
  /// Takes back the pieces' buffers once their snapshot is written (leaves the pieces empty).
  /// What the last give_back returned and no capture took since is freed first, so the pool
  /// holds at most one snapshot's buffers. Thread-safe.
  void give_back(rank_state& state);

  /// Copies that reused a buffer / had to allocate, since the start.
  std::int64_t reused() const;
  std::int64_t allocated() const;
  /// Bytes the free buffers hold.
  std::int64_t free_bytes() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_multimap<std::size_t, std::vector<float>> free_;  // by element count
  std::int64_t reused_ = 0, allocated_ = 0, free_bytes_ = 0;
};

}  // namespace mactor::checkpoint
