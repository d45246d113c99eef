// numpy's legacy MT19937 RandomState and default_rng's SeedSequence + PCG64, reproduced exactly.
#include "data/numpy_random.hpp"

#include <array>

namespace mactor::data {

mt19937_stream::mt19937_stream(std::uint32_t seed) {
  state_[0] = seed;
  for (std::uint32_t i = 1; i < n; ++i) state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + i;
}

// The twist in three loops with no wrap-around inside one: the first and second read words the
// step has not yet written (i + 1, i + m) or wrote at least 227 words back (i + m - n), so each
// vectorizes; the last word wraps to the block's start.
void mt19937_stream::regenerate() {
  constexpr std::uint32_t upper = 0x80000000u, lower = 0x7fffffffu, matrix = 0x9908b0dfu;
  const auto twist = [](std::uint32_t a, std::uint32_t b, std::uint32_t far) {
    const std::uint32_t y = (a & upper) | (b & lower);
    return far ^ (y >> 1) ^ ((y & 1u) ? matrix : 0u);
  };
  for (std::size_t i = 0; i < n - m; ++i) state_[i] = twist(state_[i], state_[i + 1], state_[i + m]);
  for (std::size_t i = n - m; i < n - 1; ++i) state_[i] = twist(state_[i], state_[i + 1], state_[i + m - n]);
  state_[n - 1] = twist(state_[n - 1], state_[0], state_[m - 1]);
  next_ = 0;
}

namespace {

// numpy.random.SeedSequence(entropy).generate_state(n_words) for an integer entropy, no spawn key.
std::vector<std::uint32_t> seed_sequence_state(std::uint64_t entropy, std::size_t n_words) {
  constexpr std::uint32_t init_a = 0x43b0d7e5, mult_a = 0x931e8875, init_b = 0x8b51f9dd,
                          mult_b = 0x58f38ded, mix_mult_l = 0xca01f9dd, mix_mult_r = 0x4973f715;
  std::vector<std::uint32_t> words;
  if (entropy == 0) words.push_back(0);
  for (; entropy; entropy >>= 32) words.push_back(static_cast<std::uint32_t>(entropy));
  std::uint32_t hash_const = init_a;
  auto hashmix = [&](std::uint32_t v) {
    v ^= hash_const;
    hash_const *= mult_a;
    v *= hash_const;
    return v ^ (v >> 16);
  };
  auto mix = [](std::uint32_t x, std::uint32_t y) {
    std::uint32_t r = mix_mult_l * x - mix_mult_r * y;
    return r ^ (r >> 16);
  };
  std::array<std::uint32_t, 4> pool{};
  for (std::size_t i = 0; i < pool.size(); ++i) pool[i] = hashmix(i < words.size() ? words[i] : 0);
  for (std::size_t s = 0; s < pool.size(); ++s)
    for (std::size_t d = 0; d < pool.size(); ++d)
      if (s != d) pool[d] = mix(pool[d], hashmix(pool[s]));
  for (std::size_t s = pool.size(); s < words.size(); ++s)
    for (std::size_t d = 0; d < pool.size(); ++d) pool[d] = mix(pool[d], hashmix(words[s]));
  std::vector<std::uint32_t> out(n_words);
  std::uint32_t hc = init_b;
  for (std::size_t i = 0; i < n_words; ++i) {
    std::uint32_t v = pool[i % pool.size()];
    v ^= hc;
    hc *= mult_b;
    v *= hc;
    out[i] = v ^ (v >> 16);
  }
  return out;
}

constexpr unsigned __int128 pcg_mult =
    (static_cast<unsigned __int128>(2549297995355413924ULL) << 64) | 4865540595714422341ULL;

}  // namespace

pcg64_generator::pcg64_generator(std::uint64_t seed) {
  auto w = seed_sequence_state(seed, 8);  // 4 uint64 words, little-endian pairs
  auto u64 = [&](int k) { return static_cast<std::uint64_t>(w[2 * k]) | (static_cast<std::uint64_t>(w[2 * k + 1]) << 32); };
  const auto initstate = (static_cast<unsigned __int128>(u64(0)) << 64) | u64(1);
  const auto initseq = (static_cast<unsigned __int128>(u64(2)) << 64) | u64(3);
  state_ = 0;
  inc_ = (initseq << 1) | 1;
  state_ = state_ * pcg_mult + inc_;
  state_ += initstate;
  state_ = state_ * pcg_mult + inc_;
}

std::uint64_t pcg64_generator::next_uint64() {
  state_ = state_ * pcg_mult + inc_;
  const auto x = static_cast<std::uint64_t>(state_ >> 64) ^ static_cast<std::uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

std::uint32_t pcg64_generator::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const std::uint64_t n = next_uint64();
  has_uint32_ = true;
  uinteger_ = static_cast<std::uint32_t>(n >> 32);
  return static_cast<std::uint32_t>(n);
}

std::vector<std::int32_t> pcg64_generator::integers_int32(std::int32_t low, std::int32_t high,
                                                          std::size_t size) {
  const auto rng = static_cast<std::uint32_t>(static_cast<std::int64_t>(high) - 1 - low);
  std::vector<std::int32_t> out(size, low);
  if (rng == 0) return out;
  for (auto& o : out) {
    std::uint32_t r;
    if (rng == 0xffffffffU) {
      r = next_uint32();
    } else {
      const std::uint64_t excl = static_cast<std::uint64_t>(rng) + 1;
      std::uint64_t m = static_cast<std::uint64_t>(next_uint32()) * excl;
      auto leftover = static_cast<std::uint32_t>(m);
      if (leftover < excl) {
        const auto threshold = static_cast<std::uint32_t>((0xffffffffULL - rng) % excl);
        while (leftover < threshold) {
          m = static_cast<std::uint64_t>(next_uint32()) * excl;
          leftover = static_cast<std::uint32_t>(m);
        }
      }
      r = static_cast<std::uint32_t>(m >> 32);
    }
    o = static_cast<std::int32_t>(static_cast<std::uint32_t>(low) + r);
  }
  return out;
}

}  // namespace mactor::data
