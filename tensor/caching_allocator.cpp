// The caching allocator: size classes, best-fit reuse within twice the request, statistics.
#include "tensor/caching_allocator.hpp"

#include <algorithm>
#include <string>

namespace mactor::tensor {

caching_allocator::caching_allocator(allocator_backing backing) : backing_(std::move(backing)) {}

caching_allocator::~caching_allocator() {
  release_cached_locked();
  for (auto& [block, size] : in_use_) backing_.release(block);
}

std::size_t caching_allocator::rounded_size(std::size_t bytes) {
  const std::size_t unit = bytes < small_limit ? small_granularity : large_granularity;
  return std::max<std::size_t>(unit, (bytes + unit - 1) / unit * unit);
}

void* caching_allocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t size = rounded_size(bytes);
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  void* block = take_cached(size);
  if (block) {
    ++stats_.cache_hits;
  } else {
    block = allocate_backing(size);
  }
  stats_.allocated_bytes += in_use_[block];
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return block;
}

// The smallest cached block of at least `size` and at most twice it, or nullptr.
void* caching_allocator::take_cached(std::size_t size) {
  auto it = cached_.lower_bound(size);
  if (it == cached_.end() || it->first > 2 * size) return nullptr;
  void* block = it->second;
  in_use_[block] = it->first;
  cached_.erase(it);
  return block;
}

void* caching_allocator::allocate_backing(std::size_t size) {
  void* block = backing_.allocate(size);
  if (!block && !cached_.empty()) {
    ++stats_.cache_flushes;
    release_cached_locked();
    block = backing_.allocate(size);
  }
  if (!block)
    throw allocator_out_of_memory("device allocator: out of memory for a block of " + std::to_string(size) +
                                  " bytes (" + std::to_string(stats_.allocated_bytes) + " bytes allocated, " +
                                  std::to_string(stats_.reserved_bytes) + " reserved)");
  ++stats_.backing_allocations;
  in_use_[block] = size;
  stats_.reserved_bytes += size;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return block;
}

void caching_allocator::deallocate(void* block) {
  if (!block) return;
  std::lock_guard lock(mutex_);
  auto it = in_use_.find(block);
  if (it == in_use_.end()) throw std::invalid_argument("caching_allocator: freeing a block it did not hand out");
  stats_.allocated_bytes -= it->second;
  cached_.emplace(it->second, block);
  in_use_.erase(it);
}

void caching_allocator::release_cached() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

void caching_allocator::release_cached_locked() {
  for (auto& [size, block] : cached_) {
    backing_.release(block);
    stats_.reserved_bytes -= size;
  }
  cached_.clear();
}

allocator_stats caching_allocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void caching_allocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

}  // namespace mactor::tensor
