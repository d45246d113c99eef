// The two 16-bit floating-point element types of mixed precision, as storage: bfloat16 (8
// exponent bits, 7 mantissa bits: fp32's range) and IEEE float16 (5 and 10: range up to 65504).
// Arithmetic happens in fp32, as on GPUs: a value is widened exactly, computed on, and rounded
// back to nearest-even, the rounding torch's .to(torch.bfloat16) / .half() performs.
#pragma once

#include <bit>
#include <cstdint>

namespace mactor::tensor {

struct bfloat16 {
  std::uint16_t bits = 0;
};

struct float16 {
  std::uint16_t bits = 0;
};

/// Exact widening.
inline float to_float(bfloat16 h) { return std::bit_cast<float>(std::uint32_t(h.bits) << 16); }

/// Round to nearest, ties to even; a NaN becomes the quiet NaN 0x7fc0 (as torch's c10::BFloat16).
inline bfloat16 to_bfloat16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {0x7fc0};
  return {static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

/// Exact widening (subnormals included).
inline float to_float(float16 h) {
  const std::uint32_t w = std::uint32_t(h.bits) << 16;
  const std::uint32_t sign = w & 0x80000000u;
  const std::uint32_t two_w = w + w;
  // Normal and special values: shift the exponent and mantissa into place and rescale.
  const float normalized = std::bit_cast<float>((two_w >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  // Subnormals: the mantissa as the fraction of a float with exponent -1, minus 0.5.
  const float subnormal = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const std::uint32_t magnitude = two_w < (1u << 27) ? std::bit_cast<std::uint32_t>(subnormal)
                                                     : std::bit_cast<std::uint32_t>(normalized);
  return std::bit_cast<float>(sign | magnitude);
}

/// Round to nearest, ties to even; above 65520 gives infinity, a NaN the quiet NaN 0x7e00 (with
/// its sign), tiny values subnormals or zero.
inline float16 to_float16(float f) {
  // The fp32 adder does the rounding: scaling moves the value to where fp16's last mantissa bit
  // is fp32's, then adding a power of two drops the bits below it, rounding to nearest-even.
  float base = (std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) & 0x7fffffffu) * 0x1.0p+112f) *
               0x1.0p-110f;
  const std::uint32_t w = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t shl1_w = w + w;
  const std::uint32_t sign = w & 0x80000000u;
  std::uint32_t bias = shl1_w & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(base);
  const std::uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
  const std::uint32_t mantissa_bits = bits & 0x00000fffu;
  const std::uint32_t nonsign = exp_bits + mantissa_bits;
  return {static_cast<std::uint16_t>((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign))};
}

}  // namespace mactor::tensor
