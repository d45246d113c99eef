// fp8 quantization kernels: per-tensor and per-block rounding through e4m3 and e5m2 against a
// numpy + ml_dtypes emulation of Transformer Engine's casts and scales (bit for bit).
#include "kernels/fp8.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tensor/half_float.hpp"

using namespace mactor;
using kernels::block_scale_rule;
using kernels::fp8_type;
namespace fs = std::filesystem;

namespace {

constexpr int rows = 256, cols = 384;

// Values spanning many binades, rows at very different magnitudes (so blocks get different
// scales), one all-zero 128 x 128 tile and a few exact fp8 values.
std::vector<float> test_matrix() {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> log_scale(-12.0f, 6.0f), row_scale(-20.0f, 12.0f);
  std::vector<float> x(std::size_t(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    const float rs = std::exp2(row_scale(rng));
    for (int c = 0; c < cols; ++c)
      x[std::size_t(r) * cols + c] = (rng() % 2 ? -1.0f : 1.0f) * rs * std::exp2(log_scale(rng));
  }
  for (int r = 128; r < 256; ++r)
    for (int c = 0; c < 128; ++c) x[std::size_t(r) * cols + c] = 0.0f;
  x[5] = 448.0f, x[6] = -0.0f;
  return x;
}

std::vector<float> read_all(const fs::path& path) {
  std::vector<float> out(std::size_t(rows) * cols);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size() * 4));
  REQUIRE(in.gcount() == std::streamsize(out.size() * 4));
  return out;
}

std::size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i])) ++wrong;
  return wrong;
}

}  // namespace

TEST_CASE("fp8 scales follow Transformer Engine's rules at the edges a hand can check") {
  // MXFP8: amax / 448 rounded up to a power of two; 448 itself needs no scaling.
  CHECK(kernels::block_scale(448.0f, 448.0f, block_scale_rule::e8m0) == std::pair{1.0f, 1.0f});
  CHECK(kernels::block_scale(449.0f, 448.0f, block_scale_rule::e8m0) == std::pair{0.5f, 2.0f});
  CHECK(kernels::block_scale(1.0f, 448.0f, block_scale_rule::e8m0) == std::pair{256.0f, 1.0f / 256});
  CHECK(kernels::block_scale(0.0f, 448.0f, block_scale_rule::e8m0) == std::pair{1.0f, 0x1.0p-127f});
  // Float8BlockScaling: 448 / amax rounded down to a power of two.
  CHECK(kernels::block_scale(1.0f, 448.0f, block_scale_rule::power_of_two) == std::pair{256.0f, 1.0f / 256});
  CHECK(kernels::block_scale(0.0f, 448.0f, block_scale_rule::power_of_two).first == 1.0f);
  // Current scaling: the plain quotient, 1 for zero or infinity.
  CHECK(kernels::current_scale(2.0f, 448.0f, false).first == 224.0f);
  CHECK(kernels::current_scale(INFINITY, 448.0f, false).first == 1.0f);
  CHECK(kernels::current_scale(0x1.0p-140f, 448.0f, false).first == FLT_MAX);
}

TEST_CASE("amax, quantize and dequantize agree with round_through_fp8 on bf16 input") {
  std::vector<tensor::bfloat16> x;
  for (float v : {0.5f, -3.0f, 1000.0f, 1e-6f, 0.0f, -70000.0f}) x.push_back(tensor::to_bfloat16(v));
  const tensor::const_tensor_view xv(x.data(), {6}, tensor::dtype::bfloat16);
  const float m = kernels::amax(xv);
  CHECK(m == tensor::to_float(tensor::to_bfloat16(-70000.0f)) * -1.0f);
  for (fp8_type t : {fp8_type::e4m3, fp8_type::e5m2}) {
    const auto [scale, inv] = kernels::current_scale(m, kernels::fp8_max(t), false);
    std::vector<std::uint8_t> q(6);
    std::vector<float> deq(6), fused(6);
    kernels::quantize_fp8(q.data(), xv, scale, t);
    kernels::dequantize_fp8({deq.data(), {6}, tensor::dtype::float32}, q.data(), inv, t);
    kernels::round_through_fp8({fused.data(), {6}, tensor::dtype::float32}, xv, scale, inv, t);
    CHECK(deq == fused);
    CHECK(std::fabs(fused[5]) == kernels::fp8_max(t) * inv);  // the amax maps to fp8's max
    CHECK(fused[4] == 0.0f);
  }
}

TEST_CASE("fp8 rounding per tensor and per MXFP8 and 128-element block equals the numpy emulation") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/kernels/fp8";
  fs::create_directories(dir);
  auto x = test_matrix();
  {
    std::ofstream out(dir / "x.f32", std::ios::binary);
    out.write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * 4));
  }
  const std::string command = std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                              "/tests/kernels/fp8_reference.py " + dir.string() + " " +
                              std::to_string(rows) + " " + std::to_string(cols);
  REQUIRE(std::system(command.c_str()) == 0);
  const tensor::const_tensor_view xv(x.data(), {rows, cols}, tensor::dtype::float32);
  std::vector<float> got(x.size());
  const tensor::tensor_view out(got.data(), {rows, cols}, tensor::dtype::float32);
  for (auto [t, name] : {std::pair{fp8_type::e4m3, "e4m3"}, {fp8_type::e5m2, "e5m2"}}) {
    const auto [scale, inv] = kernels::current_scale(kernels::amax(xv), kernels::fp8_max(t), false);
    kernels::round_through_fp8(out, xv, scale, inv, t);
    INFO("tensor " << name);
    CHECK(mismatches(got, read_all(dir / ("tensor_" + std::string(name) + ".f32"))) == 0);
    struct block_case {
      int br, bc;
      block_scale_rule rule;
      std::string file;
    };
    for (const auto& b : {block_case{1, 32, block_scale_rule::e8m0, "e8m0_1x32_"},
                          block_case{32, 1, block_scale_rule::e8m0, "e8m0_32x1_"},
                          block_case{1, 128, block_scale_rule::power_of_two, "power_of_two_1x128_"},
                          block_case{128, 128, block_scale_rule::power_of_two, "power_of_two_128x128_"}}) {
      kernels::round_through_fp8_blocks(out, xv, rows, cols, b.br, b.bc, b.rule, t);
      INFO(b.file << name);
      CHECK(mismatches(got, read_all(dir / (b.file + name + ".f32"))) == 0);
    }
  }
}
