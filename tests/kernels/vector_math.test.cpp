// The float approximations behind the fast kernels against libm in double precision.
#include "kernels/cpu/vector_math.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

using namespace mactor::kernels;

TEST_CASE("exp_approx is within a few ulp of exp over the float range and zero below it") {
  double worst = 0;
  for (double x = -87.0; x < 88.0; x += 0.0137) {
    const double want = std::exp(double(float(x)));
    worst = std::max(worst, std::abs(detail::exp_approx(float(x)) - want) / want);
  }
  CHECK(worst < 5e-7);
  CHECK(detail::exp_approx(-1e30f) == 0.0f);
  CHECK(detail::exp_approx(-INFINITY) == 0.0f);
}

TEST_CASE("erf_approx is within 5e-7 and tanh_approx within 3e-7 of libm") {
  double erf_worst = 0, tanh_worst = 0;
  for (double x = -6.0; x < 6.0; x += 0.001) {
    erf_worst = std::max(erf_worst, std::abs(detail::erf_approx(float(x)) - std::erf(double(float(x)))));
    tanh_worst = std::max(tanh_worst, std::abs(detail::tanh_approx(float(x)) - std::tanh(double(float(x)))));
  }
  CHECK(erf_worst < 5e-7);
  CHECK(tanh_worst < 3e-7);
}

TEST_CASE("row helpers give the max and the shifted exponential sum") {
  std::vector<float> row(1001);
  for (std::size_t i = 0; i < row.size(); ++i) row[i] = std::sin(0.37 * i) * 5.0f;
  double sum = 0, mx = -1e30;
  for (float v : row) mx = std::max(mx, double(v));
  for (float v : row) sum += std::exp(double(v) - mx);
  CHECK(detail::row_max(row.data(), int(row.size())) == float(mx));
  CHECK(detail::exp_shifted_sum(row.data(), int(row.size()), float(mx)) == Approx(sum).epsilon(1e-6));
  CHECK(row[0] == Approx(std::exp(0.0 - mx)).epsilon(1e-6));
}
