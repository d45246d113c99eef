// Exact-size free lists of activation blocks under one mutex.
#include "tensor/block_cache.hpp"

#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace mactor::tensor {
namespace {

constexpr std::align_val_t alignment{64};

struct cache {
  std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks;
  std::int64_t cached = 0;
};

cache& the_cache() {
  static auto* c = new cache;  // never destroyed: tensors may be freed during static destruction
  return *c;
}

}  // namespace

void* take_activation_block(std::size_t bytes) {
  auto& c = the_cache();
  {
    std::lock_guard lock(c.mutex);
    auto it = c.free_blocks.find(bytes);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      c.cached -= std::int64_t(bytes);
      return block;
    }
  }
  return ::operator new(bytes, alignment);
}

void give_back_activation_block(void* block, std::size_t bytes) noexcept {
  auto& c = the_cache();
  try {
    std::lock_guard lock(c.mutex);
    c.free_blocks[bytes].push_back(block);
    c.cached += std::int64_t(bytes);
  } catch (...) {  // no memory for the list's growth: give the block to the system instead
    ::operator delete(block, alignment);
  }
}

std::int64_t cached_activation_bytes() {
  auto& c = the_cache();
  std::lock_guard lock(c.mutex);
  return c.cached;
}

void for_each_cached_activation_block(const std::function<void(const void*, std::size_t)>& f) {
  auto& c = the_cache();
  std::lock_guard lock(c.mutex);
  for (const auto& [bytes, blocks] : c.free_blocks)
    for (const void* b : blocks) f(b, bytes);
}

void empty_activation_cache() {
  auto& c = the_cache();
  std::lock_guard lock(c.mutex);
  for (auto& [bytes, blocks] : c.free_blocks)
    for (void* b : blocks) ::operator delete(b, alignment);
  c.free_blocks.clear();
  c.cached = 0;
}

}  // namespace mactor::tensor
