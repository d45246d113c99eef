// A caching allocator: freed blocks are kept and handed out again instead of going back to the
// backing allocator (cudaMalloc and cudaFree synchronize the device, so a training step must not
// call them). Requests are rounded up to size classes; a cached block is reused when it is at
// least the rounded size and at most twice it (blocks are never split, so waste stays bounded).
// When the backing allocator fails, every cached block is released and the request retried.
// The logic is device-independent: the CUDA allocator (tensor/cuda/device_allocator.hpp) backs
// it with cudaMalloc/cudaFree, the tests with malloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace mactor::tensor {

/// Thrown when the backing allocator cannot provide a block even with the cache emptied.
class allocator_out_of_memory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Where a caching allocator gets its blocks: allocate returns nullptr on failure.
struct allocator_backing {
  std::function<void*(std::size_t)> allocate;
  std::function<void(void*)> release;
};

/// What a caching allocator holds, in bytes and calls (the fields torch.cuda.memory_stats names
/// allocated/reserved/peak).
struct allocator_stats {
  std::size_t allocated_bytes = 0;       // in blocks handed out (rounded sizes)
  std::size_t reserved_bytes = 0;        // held from the backing allocator (handed out + cached)
  std::size_t peak_allocated_bytes = 0;  // since construction or reset_peak()
  std::size_t peak_reserved_bytes = 0;
  std::int64_t allocations = 0;          // allocate() calls
  std::int64_t cache_hits = 0;           // of them, served from a cached block
  std::int64_t backing_allocations = 0;  // calls to the backing allocator that succeeded
  std::int64_t cache_flushes = 0;        // times a failed backing allocation emptied the cache
  /// The part of reserved memory not handed out (cached blocks and rounding), as a fraction.
  double fragmentation() const {
    return reserved_bytes ? 1.0 - double(allocated_bytes) / double(reserved_bytes) : 0.0;
  }
};

class caching_allocator {
 public:
  /// Requests below small_limit round up to small_granularity, the rest to large_granularity.
  static constexpr std::size_t small_limit = std::size_t(1) << 20;
  static constexpr std::size_t small_granularity = 512;
  static constexpr std::size_t large_granularity = std::size_t(2) << 20;

  explicit caching_allocator(allocator_backing backing);
  ~caching_allocator();
  caching_allocator(const caching_allocator&) = delete;
  caching_allocator& operator=(const caching_allocator&) = delete;

  /// The size class a request of `bytes` is served from.
  static std::size_t rounded_size(std::size_t bytes);

  /// A block of at least `bytes` (nullptr for 0); throws allocator_out_of_memory.
  void* allocate(std::size_t bytes);
  /// Returns a block from allocate() to the cache; nullptr is ignored.
  void deallocate(void* block);
  /// Gives every cached (free) block back to the backing allocator.
  void release_cached();

  allocator_stats stats() const;
  void reset_peak();

 private:
  void* take_cached(std::size_t size);
  void* allocate_backing(std::size_t size);
  void release_cached_locked();

  allocator_backing backing_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;           // free blocks by size
  std::unordered_map<void*, std::size_t> in_use_;      // handed-out blocks and their sizes
  allocator_stats stats_;
};

}  // namespace mactor::tensor
