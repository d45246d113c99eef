// The fp8 recipes' bookkeeping: the delayed recipe's amax history and scale against a second
// implementation of Transformer Engine's update in numpy, operand types per format, and which
// layers --first-last-layers-bf16 keeps out of fp8.
#include "model/fp8_recipe.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace mactor;
using model::fp8_amax_compute_algo;
namespace fs = std::filesystem;

TEST_CASE("the delayed recipe keeps its scale for a zero or infinite amax and rolls its history") {
  model::delayed_scaling s(3, fp8_amax_compute_algo::max, 1, 448.0f);
  CHECK(s.scale() == 1.0f);
  s.record(2.0f);
  s.update();
  CHECK(s.scale() == 448.0f / 2 / 2);  // margin 1 halves the scale
  CHECK(s.history() == std::vector<float>{0.0f, 0.0f, 2.0f});
  s.record(std::numeric_limits<float>::infinity());
  s.update();
  CHECK(s.scale() == 112.0f);  // infinite amax: the previous scale stays
  s.update();
  CHECK(s.history() == std::vector<float>{0.0f, std::numeric_limits<float>::infinity(), 0.0f});
  CHECK(s.scale() == 112.0f);  // the infinite amax is still in the window
  model::delayed_scaling recent(1, fp8_amax_compute_algo::most_recent, 0, 57344.0f);
  recent.update();
  CHECK(recent.scale() == 1.0f);  // zero amax
  recent.record(4.0f);
  recent.update();
  CHECK(recent.scale() == 14336.0f);
  CHECK(recent.scale_inv() == 1.0f / 14336.0f);
}

TEST_CASE("the delayed recipe's history and scale equal a numpy version of Transformer Engine's update") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/model/fp8_recipe";
  fs::create_directories(dir);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> log_scale(-10.0f, 12.0f);
  std::vector<float> amaxes;
  for (int i = 0; i < 40; ++i) amaxes.push_back(std::exp2(log_scale(rng)));
  amaxes[5] = 0.0f, amaxes[6] = 0.0f, amaxes[12] = std::numeric_limits<float>::infinity();
  amaxes[20] = std::numeric_limits<float>::quiet_NaN(), amaxes[30] = 1e-30f;
  {
    std::ofstream out(dir / "amax.f32", std::ios::binary);
    out.write(reinterpret_cast<const char*>(amaxes.data()), std::streamsize(amaxes.size() * 4));
  }
  struct scenario {
    int length;
    fp8_amax_compute_algo algo;
    int margin;
    float fp8_max;
  };
  const std::vector<scenario> cases = {{1, fp8_amax_compute_algo::most_recent, 0, 448.0f},
                                       {4, fp8_amax_compute_algo::max, 0, 448.0f},
                                       {4, fp8_amax_compute_algo::most_recent, 2, 57344.0f},
                                       {16, fp8_amax_compute_algo::max, 3, 57344.0f}};
  {
    std::ofstream out(dir / "cases.txt");
    for (const auto& c : cases)
      out << c.length << ' ' << (c.algo == fp8_amax_compute_algo::max ? "max" : "most_recent") << ' '
          << c.margin << ' ' << c.fp8_max << '\n';
  }
  const std::string command = std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                              "/tests/model/fp8_recipe_reference.py " + dir.string();
  REQUIRE(std::system(command.c_str()) == 0);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::size_t row = 2 + std::size_t(c.length);
    std::vector<float> want(amaxes.size() * row);
    std::ifstream in(dir / ("case" + std::to_string(i) + ".f32"), std::ios::binary);
    in.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
    REQUIRE(in.gcount() == std::streamsize(want.size() * 4));
    model::delayed_scaling s(c.length, c.algo, c.margin, c.fp8_max);
    std::size_t wrong = 0;
    for (std::size_t step = 0; step < amaxes.size(); ++step) {
      s.record(amaxes[step]);
      s.update();
      std::vector<float> got{s.scale(), s.scale_inv()};
      got.insert(got.end(), s.history().begin(), s.history().end());
      for (std::size_t k = 0; k < row; ++k) {
        const float w = want[step * row + k];
        if (std::bit_cast<std::uint32_t>(got[k]) != std::bit_cast<std::uint32_t>(w)) ++wrong;
      }
    }
    INFO("case " << i);
    CHECK(wrong == 0);
  }
}

TEST_CASE("hybrid puts gradients in e5m2 and first-last-layers-bf16 keeps the end layers out of fp8") {
  using model::gemm_operand;
  CHECK(model::operand_type(model::fp8_format::hybrid, gemm_operand::grad_output) == kernels::fp8_type::e5m2);
  CHECK(model::operand_type(model::fp8_format::hybrid, gemm_operand::input) == kernels::fp8_type::e4m3);
  CHECK(model::operand_type(model::fp8_format::e4m3, gemm_operand::grad_output) == kernels::fp8_type::e4m3);
  model::fp8_settings s;
  CHECK_FALSE(s.layer_in_fp8(0, 4));
  s.enabled = true;
  CHECK(s.layer_in_fp8(0, 4));
  s.first_last_layers_bf16 = true, s.num_layers_at_start_in_bf16 = 1, s.num_layers_at_end_in_bf16 = 2;
  std::vector<bool> got;
  for (int l = 0; l < 6; ++l) got.push_back(s.layer_in_fp8(l, 6));
  CHECK(got == std::vector<bool>{false, true, true, true, false, false});
}
