// numpy's random streams, bit for bit: the legacy RandomState (MT19937) with its shuffle, used by
// GPTDataset's index building, and default_rng (SeedSequence + PCG64) used by the mock dataset.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace mactor::data {

/// MT19937 as numpy's legacy RandomState(seed) runs it (init_genrand, then blocks of 624 words):
/// std::mt19937's stream, with the draw inline and the block regenerated in loops that vectorize.
/// Index building draws one word per element of the shuffle (millions for the mock dataset), so the
/// draw's cost shows in every rank's startup.
class mt19937_stream {
 public:
  explicit mt19937_stream(std::uint32_t seed);
  std::uint32_t operator()() {
    if (next_ == n) regenerate();
    std::uint32_t y = state_[next_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }

 private:
  static constexpr std::size_t n = 624, m = 397;
  void regenerate();
  std::uint32_t state_[n];
  std::size_t next_ = n;
};

/// numpy.random.RandomState(seed) for an integer seed.
class legacy_random_state {
 public:
  explicit legacy_random_state(std::uint32_t seed) : mt_(seed) {}
  std::uint32_t next_uint32() { return mt_(); }
  std::uint64_t next_uint64() {
    const std::uint64_t hi = next_uint32();
    return (hi << 32) | next_uint32();
  }
  /// random_interval(max): uniform in [0, max] by masked rejection.
  std::uint64_t interval(std::uint64_t max) {
    if (max == 0) return 0;
    std::uint64_t mask = max;
    mask |= mask >> 1; mask |= mask >> 2; mask |= mask >> 4;
    mask |= mask >> 8; mask |= mask >> 16; mask |= mask >> 32;
    std::uint64_t v;
    if (max <= 0xffffffffULL) {
      while ((v = (next_uint32() & mask)) > max) {}
    } else {
      while ((v = (next_uint64() & mask)) > max) {}
    }
    return v;
  }
  /// RandomState.shuffle of a 1-D array (Fisher-Yates from the end: step i swaps a[i] with
  /// a[interval(i)], i from n-1 down to 1). The draws depend on i alone, so they are taken a batch
  /// ahead and their elements prefetched: the swaps are the same, the cache misses overlap.
  template <typename T>
  void shuffle(std::span<T> a) {
    constexpr std::size_t batch = 32;
    std::size_t picked[batch];
    for (std::size_t i = a.size(); i > 1;) {
      const std::size_t steps = std::min(batch, i - 1);  // steps i-1 down to i-steps (>= 1)
      for (std::size_t k = 0; k < steps; ++k) {
        picked[k] = static_cast<std::size_t>(interval(i - 1 - k));
        __builtin_prefetch(&a[picked[k]], 1);
      }
      for (std::size_t k = 0; k < steps; ++k) std::swap(a[i - 1 - k], a[picked[k]]);
      i -= steps;
    }
  }

 private:
  mt19937_stream mt_;
};

/// numpy.random.default_rng(seed) for a non-negative integer seed (SeedSequence + PCG64).
class pcg64_generator {
 public:
  explicit pcg64_generator(std::uint64_t seed);
  std::uint64_t next_uint64();
  std::uint32_t next_uint32();  // numpy buffers the high half of a 64-bit draw
  /// Generator.integers(low, high, size, dtype=int32) with high exclusive (Lemire's method).
  std::vector<std::int32_t> integers_int32(std::int32_t low, std::int32_t high, std::size_t size);

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  std::uint32_t uinteger_ = 0;
};

}  // namespace mactor::data
