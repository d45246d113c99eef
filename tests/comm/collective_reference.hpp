// Shared by the collective tests: deterministic per-rank inputs and a naive reference that
// sums in double in rank order, independent of the ring's chunking and order.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace mactor::comm::testing {

/// Input element i of the member at group position `member`; `integral` gives small integers
/// whose sums are exact in float, otherwise values of mixed magnitude and sign.
inline float input_value(int member, std::size_t i, bool integral) {
  std::uint64_t x = (static_cast<std::uint64_t>(member) + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  if (integral) return static_cast<float>(static_cast<int>(x % 201) - 100);
  return (static_cast<float>(x % 2000001) / 1000000.0f - 1.0f) * ((x >> 40) % 2 ? 1e3f : 1e-2f);
}

inline std::vector<float> inputs(int member, std::size_t count, bool integral) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = input_value(member, i, integral);
  return v;
}

inline std::vector<double> reference_sum(int members, std::size_t count, bool integral) {
  std::vector<double> out(count, 0.0);
  for (int m = 0; m < members; ++m)
    for (std::size_t i = 0; i < count; ++i) out[i] += input_value(m, i, integral);
  return out;
}

/// The number of elements whose relative error against the reference exceeds 1e-5 (scaled by
/// the magnitude of the summands, since float sums of mixed signs lose digits).
inline std::size_t count_mismatches(const std::vector<float>& got, const std::vector<double>& want,
                                    std::size_t offset, int members, bool integral) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double scale = 0;
    for (int m = 0; m < members; ++m) scale += std::abs(input_value(m, offset + i, integral));
    if (integral ? got[i] != want[offset + i]
                 : std::abs(got[i] - want[offset + i]) > 1e-6 * scale + 1e-30)
      ++bad;
  }
  return bad;
}

/// Runs every collective on `c` and returns a description of the first failure, or "".
std::string exercise_collectives(communicator& c, std::size_t count);

}  // namespace mactor::comm::testing
