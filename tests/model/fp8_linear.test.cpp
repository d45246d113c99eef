// One linear layer's fp8 GEMMs (model/fp8_linear) against a numpy + ml_dtypes emulation of
// Transformer Engine's Linear for every recipe and format, and the delayed recipe's reuse of a
// forward's scales when that forward is recomputed.
#include "model/fp8_linear.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using namespace mactor;
namespace fs = std::filesystem;

namespace {

constexpr int rows = 64, in = 160, out = 96;

std::vector<float> random_values(std::size_t n, std::uint64_t seed, float spread) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-spread, spread);
  std::vector<float> v(n);
  for (auto& e : v) e = normal(rng) * std::exp2(log_scale(rng));
  return v;
}

void write(const fs::path& p, const std::vector<float>& v) {
  std::ofstream o(p, std::ios::binary);
  o.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
}

std::vector<float> read(const fs::path& p, std::size_t n) {
  std::vector<float> v(n);
  std::ifstream i(p, std::ios::binary);
  i.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 4));
  REQUIRE(i.gcount() == std::streamsize(n * 4));
  return v;
}

// max |got - want| / max |want|: the GEMMs sum in different orders (BLAS and numpy).
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, top = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - want[i]));
    top = std::max(top, std::fabs(double(want[i])));
  }
  return err / top;
}

tensor::tensor_view view(std::vector<float>& v, std::int64_t r, std::int64_t c) {
  return {v.data(), {r, c}, tensor::dtype::float32};
}

model::fp8_settings settings(model::fp8_recipe recipe, model::fp8_format format, bool wgrad) {
  model::fp8_settings s;
  s.enabled = true, s.recipe = recipe, s.fp8 = format, s.fp8_wgrad = wgrad;
  s.fp8_amax_history_len = 2, s.amax_compute_algo = model::fp8_amax_compute_algo::max, s.fp8_margin = 1;
  return s;
}

}  // namespace

TEST_CASE("an fp8 linear's forward and backward equal the numpy emulation of each TE recipe and format") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/model/fp8_linear";
  fs::create_directories(dir);
  auto w = random_values(std::size_t(out) * in, 1, 3.0f);
  write(dir / "w.f32", w);
  std::vector<std::vector<float>> xs, dys;
  for (int s = 0; s < 2; ++s) {
    xs.push_back(random_values(std::size_t(rows) * in, 10 + s, 4.0f + 2 * s));
    dys.push_back(random_values(std::size_t(rows) * out, 20 + s, 6.0f));
    for (auto& e : dys.back()) e *= 1e-4f;  // gradients are small: e5m2's range matters
    write(dir / ("x" + std::to_string(s) + ".f32"), xs.back());
    write(dir / ("dy" + std::to_string(s) + ".f32"), dys.back());
  }
  struct scenario {
    model::fp8_recipe recipe;
    const char* name;
    model::fp8_format format;
    bool wgrad;
  };
  using R = model::fp8_recipe;
  using F = model::fp8_format;
  for (const auto& c : {scenario{R::delayed, "delayed", F::hybrid, true}, scenario{R::delayed, "delayed", F::e4m3, false},
                        scenario{R::tensorwise, "tensorwise", F::hybrid, true}, scenario{R::tensorwise, "tensorwise", F::e4m3, true},
                        scenario{R::mxfp8, "mxfp8", F::hybrid, true}, scenario{R::mxfp8, "mxfp8", F::e4m3, true},
                        scenario{R::blockwise, "blockwise", F::hybrid, true}, scenario{R::blockwise, "blockwise", F::e4m3, true}}) {
    const char* format = c.format == F::hybrid ? "hybrid" : "e4m3";
    const std::string command = std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                                "/tests/model/fp8_linear_reference.py " + dir.string() + " " +
                                std::to_string(rows) + " " + std::to_string(in) + " " + std::to_string(out) +
                                " " + c.name + " " + format + " " + (c.wgrad ? "1" : "0");
    REQUIRE(std::system(command.c_str()) == 0);
    model::fp8_linear linear(settings(c.recipe, c.format, c.wgrad));
    for (int s = 0; s < 2; ++s) {
      std::vector<float> y(std::size_t(rows) * out), dw(std::size_t(out) * in, 0.0f), dx(std::size_t(rows) * in);
      linear.forward(view(xs[s], rows, in), view(w, out, in), view(y, rows, out), rows, in, out);
      linear.backward(view(dys[s], rows, out), view(xs[s], rows, in), view(w, out, in), view(dw, out, in),
                      view(dx, rows, in), rows, in, out);
      const std::string step = std::to_string(s);
      INFO(c.name << " " << format << (c.wgrad ? "" : " --no-fp8-wgrad") << " step " << s);
      CHECK(relative_error(y, read(dir / ("y" + step + ".f32"), y.size())) < 1e-5);
      CHECK(relative_error(dw, read(dir / ("dw" + step + ".f32"), dw.size())) < 1e-5);
      CHECK(relative_error(dx, read(dir / ("dx" + step + ".f32"), dx.size())) < 1e-5);
    }
  }
}

TEST_CASE("a recomputed forward under the delayed recipe reuses its first scales and records nothing") {
  auto w = random_values(std::size_t(out) * in, 1, 3.0f);
  auto x0 = random_values(std::size_t(rows) * in, 2, 4.0f), x1 = random_values(std::size_t(rows) * in, 3, 8.0f);
  auto dy = random_values(std::size_t(rows) * out, 4, 2.0f);
  const auto s = settings(model::fp8_recipe::delayed, model::fp8_format::hybrid, true);
  std::vector<float> y(std::size_t(rows) * out), first(y.size()), dw(std::size_t(out) * in, 0.0f), dx(std::size_t(rows) * in);
  std::vector<float> dw_kept = dw, dx_kept = dx;
  // Pipeline order F0 F1 B0: once with x0's activations kept, once recomputing F0 before B0.
  model::fp8_linear kept(s), recomputed(s);
  for (auto* l : {&kept, &recomputed}) {
    l->forward(view(x0, rows, in), view(w, out, in), view(first, rows, out), rows, in, out);
    l->forward(view(x1, rows, in), view(w, out, in), view(y, rows, out), rows, in, out);
  }
  const auto history = recomputed.input_scaling().history();
  std::vector<float> again(y.size());
  recomputed.forward(view(x0, rows, in), view(w, out, in), view(again, rows, out), rows, in, out);
  CHECK(again == first);
  CHECK(recomputed.input_scaling().history() == history);
  CHECK(recomputed.input_scaling().scale() != 1.0f);  // the scales did move after F0
  kept.backward(view(dy, rows, out), view(x0, rows, in), view(w, out, in), view(dw_kept, out, in), view(dx_kept, rows, in), rows, in, out);
  recomputed.backward(view(dy, rows, out), view(x0, rows, in), view(w, out, in), view(dw, out, in), view(dx, rows, in), rows, in, out);
  CHECK(dw == dw_kept);
  CHECK(dx == dx_kept);
}
