// A caching allocator for activation buffers, as PyTorch's caching allocator serves autograd:
// a freed block goes to a free list of its exact size, and the next request of that size takes it
// back without a trip to the system (no unmapping, no page faults on reuse). Layers free their
// activations after each backward, and recomputation frees and refills them within one, so the
// same sizes come round every micro-batch. The ledger counts blocks in use; cached() the rest.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace mactor::tensor {

/// A block of at least `bytes`, 64-byte aligned: a cached one of that exact size if any.
void* take_activation_block(std::size_t bytes);
/// Returns a block from take_activation_block to the cache.
void give_back_activation_block(void* block, std::size_t bytes) noexcept;
/// Bytes held in the cache, free for reuse.
std::int64_t cached_activation_bytes();
/// Frees every cached block to the system (as torch.cuda.empty_cache()).
void empty_activation_cache();
/// Calls f(block, bytes) for each cached block, under the cache's lock (f must not allocate
/// tensors).
void for_each_cached_activation_block(const std::function<void(const void*, std::size_t)>& f);

}  // namespace mactor::tensor
