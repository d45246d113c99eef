// The caching allocator's logic on a counting malloc backing: size classes, reuse within twice
// the request, statistics, retry after flushing the cache, and errors.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <set>

#include "tensor/caching_allocator.hpp"

using mactor::tensor::allocator_backing;
using mactor::tensor::allocator_out_of_memory;
using mactor::tensor::caching_allocator;

namespace {

// malloc with a byte limit, counting what it hands out (the stand-in for cudaMalloc).
struct counting_backing {
  std::size_t limit = std::size_t(1) << 40;
  std::size_t held = 0;
  int calls = 0;
  std::set<void*> live;

  allocator_backing backing() {
    return {[this](std::size_t bytes) -> void* {
              ++calls;
              if (held + bytes > limit) return nullptr;
              held += bytes;
              void* p = std::malloc(bytes);
              live.insert(p);
              sizes[p] = bytes;
              return p;
            },
            [this](void* p) {
              held -= sizes.at(p);
              live.erase(p);
              std::free(p);
            }};
  }
  std::map<void*, std::size_t> sizes;
};

}  // namespace

TEST_CASE("caching allocator rounds requests to size classes", "[tensor][allocator]") {
  CHECK(caching_allocator::rounded_size(1) == 512);
  CHECK(caching_allocator::rounded_size(512) == 512);
  CHECK(caching_allocator::rounded_size(513) == 1024);
  CHECK(caching_allocator::rounded_size((1 << 20) - 1) == (1 << 20));
  CHECK(caching_allocator::rounded_size(1 << 20) == (2 << 20));
  CHECK(caching_allocator::rounded_size((2 << 20) + 1) == (4 << 20));
}

TEST_CASE("caching allocator reuses freed blocks and counts bytes", "[tensor][allocator]") {
  counting_backing backing;
  caching_allocator alloc(backing.backing());
  void* a = alloc.allocate(1000);  // class 1024
  void* b = alloc.allocate(3 << 20);  // class 4 MiB
  CHECK(alloc.stats().allocated_bytes == 1024 + (4 << 20));
  CHECK(alloc.stats().reserved_bytes == 1024 + (4 << 20));
  alloc.deallocate(a);
  CHECK(alloc.stats().allocated_bytes == (4 << 20));
  CHECK(alloc.stats().reserved_bytes == 1024 + (4 << 20));  // cached, not returned

  void* c = alloc.allocate(600);  // class 1024 again: the cached block
  CHECK(c == a);
  CHECK(alloc.stats().cache_hits == 1);
  CHECK(backing.calls == 2);

  alloc.deallocate(b);
  void* d = alloc.allocate(1 << 20);  // class 2 MiB: the 4 MiB block is within twice it
  CHECK(d == b);
  void* e = alloc.allocate(1 << 20);  // nothing cached left: a new block
  CHECK(e != b);
  CHECK(backing.calls == 3);
  alloc.deallocate(c), alloc.deallocate(d), alloc.deallocate(e);
  CHECK(alloc.stats().allocated_bytes == 0);
  CHECK(alloc.stats().peak_allocated_bytes == 1024 + (4 << 20) + (2 << 20));
  alloc.release_cached();
  CHECK(alloc.stats().reserved_bytes == 0);
  CHECK(backing.live.empty());
}

TEST_CASE("caching allocator does not hand out a block more than twice the request", "[tensor][allocator]") {
  counting_backing backing;
  caching_allocator alloc(backing.backing());
  void* big = alloc.allocate(8 << 20);
  alloc.deallocate(big);
  void* small = alloc.allocate(2 << 20);  // 8 MiB > 2 * 2 MiB: not reused
  CHECK(small != big);
  CHECK(alloc.stats().fragmentation() > 0.7);  // 8 of 10 MiB reserved are idle
  alloc.deallocate(small);
}

TEST_CASE("caching allocator empties its cache and retries when the backing runs out", "[tensor][allocator]") {
  counting_backing backing;
  backing.limit = 6 << 20;
  caching_allocator alloc(backing.backing());
  alloc.deallocate(alloc.allocate(4 << 20));  // 4 MiB cached
  void* p = alloc.allocate(2 << 20 | 1);      // class 4 MiB: reused from the cache
  alloc.deallocate(p);
  void* q = alloc.allocate(5 << 20);  // class 6 MiB: 4 + 6 > 6, so the cache is flushed first
  CHECK(alloc.stats().cache_flushes == 1);
  CHECK(alloc.stats().reserved_bytes == (6 << 20));
  CHECK_THROWS_AS(alloc.allocate(1 << 20), allocator_out_of_memory);
  alloc.deallocate(q);
  alloc.reset_peak();
  CHECK(alloc.stats().peak_allocated_bytes == 0);
  CHECK(alloc.stats().peak_reserved_bytes == (6 << 20));
}

TEST_CASE("caching allocator refuses a block it did not hand out", "[tensor][allocator]") {
  counting_backing backing;
  caching_allocator alloc(backing.backing());
  int local = 0;
  CHECK_THROWS_AS(alloc.deallocate(&local), std::invalid_argument);
  CHECK(alloc.allocate(0) == nullptr);
  alloc.deallocate(nullptr);
}
