// fp8 conversions: a hand-checked table of the edge cases, then ml_dtypes' roundings of 200k
// fp32 values (clamped first, as Transformer Engine's saturating cast) and its widening of all
// 256 patterns of each type.
#include "tensor/float8.hpp"

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

bool same(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

}  // namespace

TEST_CASE("e4m3 and e5m2 round to nearest-even and saturate at the edges a hand can check") {
  const float inf = std::numeric_limits<float>::infinity();
  // e4m3: 1 + 2^-3 follows 1; 448 is the largest; 2^-9 the smallest subnormal; no infinity.
  CHECK(to_float8_e4m3(1.0f).bits == 0x38);
  CHECK(to_float8_e4m3(1.0f + 0x1.0p-4f).bits == 0x38);      // tie, even below
  CHECK(to_float8_e4m3(1.0f + 3 * 0x1.0p-4f).bits == 0x3a);  // tie, even above
  CHECK(to_float8_e4m3(448.0f).bits == 0x7e);
  CHECK(to_float8_e4m3(464.0f).bits == 0x7e);   // would round to 480 (the NaN pattern): saturates
  CHECK(to_float8_e4m3(1e30f).bits == 0x7e);
  CHECK(to_float8_e4m3(-inf).bits == 0xfe);
  CHECK((to_float8_e4m3(std::nanf("")).bits & 0x7f) == 0x7f);
  CHECK(to_float8_e4m3(0x1.0p-9f).bits == 0x01);
  CHECK(to_float8_e4m3(0x1.0p-10f).bits == 0x00);  // tie with zero: even
  CHECK(to_float8_e4m3(0x1.8p-10f).bits == 0x01);
  CHECK(to_float8_e4m3(0x1.ep-7f).bits == 0x08);   // 7.5 * 2^-9 rounds up to the smallest normal
  CHECK(to_float8_e4m3(-0.0f).bits == 0x80);
  CHECK(to_float(float8_e4m3{0x7e}) == 448.0f);
  CHECK(to_float(float8_e4m3{0x01}) == 0x1.0p-9f);
  CHECK(to_float(float8_e4m3{0x08}) == 0x1.0p-6f);
  CHECK(std::isnan(to_float(float8_e4m3{0xff})));
  // e5m2: max 57344 = 1.75 * 2^15; 2^-16 the smallest subnormal; 0x7c infinity.
  CHECK(to_float8_e5m2(1.0f).bits == 0x3c);
  CHECK(to_float8_e5m2(1.0f + 0x1.0p-3f).bits == 0x3c);  // tie, even below
  CHECK(to_float8_e5m2(57344.0f).bits == 0x7b);
  CHECK(to_float8_e5m2(61440.0f).bits == 0x7b);  // the tie above the max: saturates
  CHECK(to_float8_e5m2(inf).bits == 0x7b);
  CHECK(to_float8_e5m2(0x1.0p-16f).bits == 0x01);
  CHECK(to_float8_e5m2(0x1.0p-17f).bits == 0x00);
  CHECK(to_float(float8_e5m2{0x7b}) == 57344.0f);
  CHECK(to_float(float8_e5m2{0xfc}) == -inf);
  CHECK(std::isnan(to_float(float8_e5m2{0x7d})));
  CHECK(to_float(float8_e5m2{0x03}) == 3 * 0x1.0p-16f);
}

TEST_CASE("e4m3 and e5m2 conversions equal ml_dtypes on 200k values and all 256 patterns") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/tensor/float8";
  fs::create_directories(dir);
  // Random bit patterns cover every exponent; log-uniform magnitudes across both types' ranges
  // stress the subnormal and overflow boundaries; exact ties are midpoints of neighbours.
  std::vector<float> inputs;
  std::mt19937_64 rng(8);
  for (int i = 0; i < 60000; ++i) inputs.push_back(std::bit_cast<float>(std::uint32_t(rng())));
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f), log_scale(-20.0f, 17.0f);
  for (int i = 0; i < 60000; ++i) inputs.push_back(unit(rng));
  for (int i = 0; i < 60000; ++i) inputs.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(log_scale(rng)));
  for (int p = 0; p < 255; ++p) {
    for (bool e5 : {false, true}) {
      const float a = e5 ? to_float(float8_e5m2{std::uint8_t(p)}) : to_float(float8_e4m3{std::uint8_t(p)});
      const float b = e5 ? to_float(float8_e5m2{std::uint8_t(p + 1)}) : to_float(float8_e4m3{std::uint8_t(p + 1)});
      if (std::isfinite(a) && std::isfinite(b)) inputs.push_back(a + (b - a) / 2);
    }
  }
  while (inputs.size() < 200000) inputs.push_back(unit(rng) * 1e-3f);
  test::run_reference_on(dir, inputs, "float8_reference.py");

  const auto e4m3 = read_all<std::uint8_t>(dir / "e4m3.u8", inputs.size());
  const auto e5m2 = read_all<std::uint8_t>(dir / "e5m2.u8", inputs.size());
  std::size_t e4m3_wrong = 0, e5m2_wrong = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    // NaN payloads are not compared: both sides give a NaN.
    if (!same(to_float(to_float8_e4m3(inputs[i])), to_float(float8_e4m3{e4m3[i]}))) ++e4m3_wrong;
    if (!same(to_float(to_float8_e5m2(inputs[i])), to_float(float8_e5m2{e5m2[i]}))) ++e5m2_wrong;
  }
  CHECK(e4m3_wrong == 0);
  CHECK(e5m2_wrong == 0);

  const auto e4m3_wide = read_all<float>(dir / "e4m3_wide.f32", 256);
  const auto e5m2_wide = read_all<float>(dir / "e5m2_wide.f32", 256);
  std::size_t wide_wrong = 0;
  for (std::uint32_t p = 0; p < 256; ++p) {
    if (!same(to_float(float8_e4m3{std::uint8_t(p)}), e4m3_wide[p])) ++wide_wrong;
    if (!same(to_float(float8_e5m2{std::uint8_t(p)}), e5m2_wide[p])) ++wide_wrong;
  }
  CHECK(wide_wrong == 0);
}
