// The two 8-bit floating-point element types of fp8 training, as storage: e4m3 (OCP's
// float8_e4m3fn: 4 exponent bits, 3 mantissa bits, max 448, no infinity, NaN 0x7f/0xff) for
// forward tensors and e5m2 (5 and 2: max 57344, with infinity) for gradients under the hybrid
// format. Narrowing rounds to nearest-even and saturates as Transformer Engine's casts do
// (satfinite): a finite value or infinity beyond the largest finite value becomes +-max, a NaN
// stays NaN. Widening is exact.
#pragma once

#include <bit>
#include <cstdint>

namespace mactor::tensor {

struct float8_e4m3 {
  std::uint8_t bits = 0;
};

struct float8_e5m2 {
  std::uint8_t bits = 0;
};

namespace detail {

// One fp8 layout: Man mantissa bits, the exponent's bias, the largest
// finite pattern (sign clear) and the NaN pattern this conversion writes.
template <int Man, int Bias, std::uint8_t MaxBits, std::uint8_t NanBits>
struct float8_layout {
  static std::uint8_t narrow(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
    const std::uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | NanBits;
    const int e32 = int(a >> 23);
    constexpr int min_normal_e32 = 127 + 1 - Bias;  // fp32's biased exponent of fp8's 2^(1-Bias)
    if (e32 >= min_normal_e32) {
      // Round fp32's mantissa to Man bits (a carry moves into the exponent), then rebias.
      constexpr int drop = 23 - Man;
      const std::uint32_t r = (a + ((1u << (drop - 1)) - 1) + ((a >> drop) & 1u)) >> drop;
      const std::uint32_t v = r - (std::uint32_t(127 - Bias) << Man);
      return sign | static_cast<std::uint8_t>(v > MaxBits ? MaxBits : v);  // infinity included
    }
    // fp8 subnormal: the value in units of 2^(1-Bias-Man), rounded to nearest-even. fp32's
    // subnormals are far below half a unit.
    if (e32 == 0) return sign;
    const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const int shift = 151 - Bias - Man - e32;
    if (shift >= 32) return sign;
    std::uint32_t q = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // 2^Man is the smallest normal: right
    return sign | static_cast<std::uint8_t>(q);
  }

  static float widen(std::uint8_t b, bool nan, bool inf) {
    const std::uint32_t sign = std::uint32_t(b & 0x80u) << 24;
    if (nan) return std::bit_cast<float>(sign | 0x7fc00000u);
    if (inf) return std::bit_cast<float>(sign | 0x7f800000u);
    const std::uint32_t exp = (b & 0x7fu) >> Man, mant = b & ((1u << Man) - 1);
    if (exp == 0) {  // subnormal: mant * 2^(1-Bias-Man), exact in fp32
      const float unit = std::bit_cast<float>(std::uint32_t(127 + 1 - Bias - Man) << 23);
      return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(float(mant) * unit));
    }
    return std::bit_cast<float>(sign | ((exp - Bias + 127) << 23) | (mant << (23 - Man)));
  }
};

using e4m3_layout = float8_layout<3, 7, 0x7e, 0x7f>;
using e5m2_layout = float8_layout<2, 15, 0x7b, 0x7e>;

}  // namespace detail

inline constexpr float float8_e4m3_max = 448.0f;
inline constexpr float float8_e5m2_max = 57344.0f;

/// Round to nearest-even, saturating to +-448; NaN gives 0x7f (with its sign).
inline float8_e4m3 to_float8_e4m3(float f) { return {detail::e4m3_layout::narrow(f)}; }
/// Round to nearest-even, saturating to +-57344 (infinity too); NaN gives 0x7e (with its sign).
inline float8_e5m2 to_float8_e5m2(float f) { return {detail::e5m2_layout::narrow(f)}; }

/// Exact widening; 0x7f and 0xff are NaN.
inline float to_float(float8_e4m3 h) {
  return detail::e4m3_layout::widen(h.bits, (h.bits & 0x7fu) == 0x7fu, false);
}
/// Exact widening; exponent 31 is infinity (mantissa 0) or NaN.
inline float to_float(float8_e5m2 h) {
  const bool top = (h.bits & 0x7cu) == 0x7cu;
  return detail::e5m2_layout::widen(h.bits, top && (h.bits & 3u), top && !(h.bits & 3u));
}

}  // namespace mactor::tensor
