// bfloat16 and float16 conversions: a hand-checked table of the edge cases, then PyTorch's own
// roundings of 200k fp32 values and its widening of all 65536 patterns of each type.
#include "tensor/half_float.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

#include "tests/tensor/reference_files.hpp"

using namespace mactor::tensor;
namespace test = mactor::test;
namespace fs = std::filesystem;

namespace {

using test::read_all;

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

}  // namespace

TEST_CASE("bf16 and fp16 round to nearest-even at the edges a hand can check") {
  // bf16 keeps fp32's top 16 bits; halfway cases go to the even pattern.
  CHECK(to_bfloat16(1.0f).bits == 0x3f80);
  CHECK(to_bfloat16(std::bit_cast<float>(0x3f808000u)).bits == 0x3f80);  // tie, even below
  CHECK(to_bfloat16(std::bit_cast<float>(0x3f818000u)).bits == 0x3f82);  // tie, even above
  CHECK(to_bfloat16(std::bit_cast<float>(0x3f808001u)).bits == 0x3f81);  // past the tie
  CHECK(to_bfloat16(-2.0f).bits == 0xc000);
  CHECK(to_bfloat16(std::numeric_limits<float>::infinity()).bits == 0x7f80);
  CHECK(to_bfloat16(std::bit_cast<float>(0x7f7fffffu)).bits == 0x7f80);  // max float rounds up to inf
  CHECK(to_bfloat16(std::numeric_limits<float>::quiet_NaN()).bits == 0x7fc0);
  CHECK(to_float(bfloat16{0x4049}) == 3.140625f);
  // fp16: 1 + 2^-10 is the next value after 1; 65504 the largest; 2^-24 the smallest subnormal.
  CHECK(to_float16(1.0f).bits == 0x3c00);
  CHECK(to_float16(1.0f + 0x1.0p-11f).bits == 0x3c00);  // tie, even below
  CHECK(to_float16(1.0f + 3 * 0x1.0p-11f).bits == 0x3c02);  // tie, even above
  CHECK(to_float16(65504.0f).bits == 0x7bff);
  CHECK(to_float16(65519.0f).bits == 0x7bff);
  CHECK(to_float16(65520.0f).bits == 0x7c00);  // the tie above the max goes to infinity
  CHECK(to_float16(0x1.0p-24f).bits == 0x0001);
  CHECK(to_float16(0x1.0p-25f).bits == 0x0000);  // tie with zero: even
  CHECK(to_float16(-0.0f).bits == 0x8000);
  CHECK(to_float(float16{0x0001}) == 0x1.0p-24f);
  CHECK(to_float(float16{0x7bff}) == 65504.0f);
  CHECK(std::isinf(to_float(float16{0xfc00})));
  CHECK(std::isnan(to_float(float16{0x7e00})));
}

TEST_CASE("bf16 and fp16 conversions equal PyTorch's on 200k values and all 65536 patterns") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/tensor/half_float";
  fs::create_directories(dir);
  // Random bit patterns cover every exponent; values near 1 and around fp16's range stress
  // the rounding of the mantissa and the subnormal and overflow boundaries.
  std::vector<float> inputs;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100000; ++i) inputs.push_back(std::bit_cast<float>(std::uint32_t(rng())));
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f), log_scale(-30.0f, 17.0f);
  for (int i = 0; i < 50000; ++i) inputs.push_back(unit(rng));
  for (int i = 0; i < 50000; ++i) inputs.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(log_scale(rng)));
  for (float f : {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.99f, 0x1.0p-24f, 0x1.0p-25f, 0x1.8p-25f})
    inputs.push_back(f);
  test::run_reference_on(dir, inputs, "half_float_reference.py");

  const auto bf16 = read_all<std::uint16_t>(dir / "bf16.u16", inputs.size());
  const auto fp16 = read_all<std::uint16_t>(dir / "fp16.u16", inputs.size());
  std::size_t bf16_wrong = 0, fp16_wrong = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const bool nan = std::isnan(inputs[i]);
    // NaN payloads are not compared: both sides give a NaN.
    if (nan ? !std::isnan(to_float(to_bfloat16(inputs[i]))) : to_bfloat16(inputs[i]).bits != bf16[i]) ++bf16_wrong;
    if (nan ? !std::isnan(to_float(to_float16(inputs[i]))) : to_float16(inputs[i]).bits != fp16[i]) ++fp16_wrong;
  }
  CHECK(bf16_wrong == 0);
  CHECK(fp16_wrong == 0);

  const auto bf16_wide = read_all<float>(dir / "bf16_wide.f32", 65536);
  const auto fp16_wide = read_all<float>(dir / "fp16_wide.f32", 65536);
  std::size_t wide_wrong = 0;
  for (std::uint32_t p = 0; p < 65536; ++p) {
    const float b = to_float(bfloat16{std::uint16_t(p)}), h = to_float(float16{std::uint16_t(p)});
    if (std::isnan(b) != std::isnan(bf16_wide[p]) || (!std::isnan(b) && bits(b) != bits(bf16_wide[p]))) ++wide_wrong;
    if (std::isnan(h) != std::isnan(fp16_wide[p]) || (!std::isnan(h) && bits(h) != bits(fp16_wide[p]))) ++wide_wrong;
  }
  CHECK(wide_wrong == 0);
}
