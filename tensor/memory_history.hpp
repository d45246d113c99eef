// Megatron's --record-memory-history on the host: while recording, every tensor allocation and
// free is kept as an event (at most max_entries, the oldest dropped, as PyTorch's
// trace_alloc_max_entries), with the blocks alive now, so a snapshot can show what memory held
// over time and by whom (the memory kind stands in for PyTorch's Python frames).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/memory_ledger.hpp"

namespace mactor::tensor {

struct memory_event {
  bool alloc = true;  ///< false: a free
  std::uintptr_t address = 0;
  std::int64_t bytes = 0;
  memory_kind kind = memory_kind::other;
  std::int64_t time_us = 0;  ///< microseconds since the Unix epoch
};

struct memory_block {
  std::uintptr_t address = 0;
  std::int64_t bytes = 0;
  memory_kind kind = memory_kind::other;
};

struct memory_history_snapshot {
  std::vector<memory_block> active;  ///< blocks allocated while recording and alive now
  std::vector<memory_block> cached;  ///< activation blocks the block cache holds for reuse
  std::vector<memory_event> trace;   ///< the recorded events, oldest first
};

/// Starts recording (again, from nothing); blocks allocated before are not known.
void start_memory_history(std::size_t max_entries = 100000);
void stop_memory_history();
bool memory_history_recording();
/// Called by tensor's allocation and free (cheap when not recording).
void record_memory_event(bool alloc, const void* address, std::int64_t bytes,
                         memory_kind kind) noexcept;
memory_history_snapshot take_memory_history_snapshot();

}  // namespace mactor::tensor
