// The recorder: one mutex over the event ring and the map of live blocks.
#include "tensor/memory_history.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>

#include "tensor/block_cache.hpp"

namespace mactor::tensor {
namespace {

struct recorder {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::size_t max_entries = 0;
  std::deque<memory_event> events;
  std::map<std::uintptr_t, memory_block> live;
};

recorder& the_recorder() {
  static auto* r = new recorder;  // never destroyed: tensors may be freed during static destruction
  return *r;
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void start_memory_history(std::size_t max_entries) {
  auto& r = the_recorder();
  std::lock_guard lock(r.mutex);
  r.max_entries = max_entries;
  r.events.clear();
  r.live.clear();
  r.on = true;
}

void stop_memory_history() {
  auto& r = the_recorder();
  std::lock_guard lock(r.mutex);
  r.on = false;
  r.events.clear();
  r.live.clear();
}

bool memory_history_recording() { return the_recorder().on.load(std::memory_order_relaxed); }

void record_memory_event(bool alloc, const void* address, std::int64_t bytes,
                         memory_kind kind) noexcept {
  auto& r = the_recorder();
  if (!r.on.load(std::memory_order_relaxed)) return;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  try {
    std::lock_guard lock(r.mutex);
    if (!r.on) return;
    if (alloc)
      r.live[at] = {at, bytes, kind};
    else if (r.live.erase(at) == 0)
      return;  // allocated before recording started: PyTorch's trace has no such free either
    if (r.max_entries == 0) return;
    if (r.events.size() == r.max_entries) r.events.pop_front();
    r.events.push_back({alloc, at, bytes, kind, now_us()});
  } catch (...) {  // out of memory for the record: the history misses this event, the tensor not
  }
}

memory_history_snapshot take_memory_history_snapshot() {
  auto& r = the_recorder();
  memory_history_snapshot s;
  {
    std::lock_guard lock(r.mutex);
    for (const auto& [at, block] : r.live) s.active.push_back(block);
    s.trace.assign(r.events.begin(), r.events.end());
  }
  for_each_cached_activation_block([&](const void* block, std::size_t bytes) {
    s.cached.push_back({reinterpret_cast<std::uintptr_t>(block), std::int64_t(bytes),
                        memory_kind::activations});
  });
  return s;
}

}  // namespace mactor::tensor
