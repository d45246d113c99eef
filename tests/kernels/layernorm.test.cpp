// LayerNorm and RMSNorm backward against finite differences, and forward against the definition.
#include "kernels/layernorm.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/rmsnorm.hpp"
#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

TEST_CASE("layernorm output has zero mean and unit variance before the affine part") {
  const int n = 3, h = 8;
  auto x = test::random_vector(n * h, 1, 3.0);
  std::vector<double> gamma(h, 1.0), y(n * h), mean(n), rstd(n);
  kernels::layernorm_forward<double>(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                                     nullptr, n, h, 1e-12, false);
  for (int i = 0; i < n; ++i) {
    double s = 0, sq = 0;
    for (int j = 0; j < h; ++j) s += y[i * h + j], sq += y[i * h + j] * y[i * h + j];
    CHECK(std::abs(s / h) < 1e-12);
    CHECK(std::abs(sq / h - 1.0) < 1e-9);
  }
}

TEST_CASE("layernorm backward matches finite differences, with and without zero-centered gamma") {
  const int n = 4, h = 6;
  for (bool one_p : {false, true}) {
    auto x = test::random_vector(n * h, 2), gamma = test::random_vector(h, 3);
    auto beta = test::random_vector(h, 4);
    const auto probe = test::random_vector(n * h, 5);
    std::vector<double> y(n * h), mean(n), rstd(n);
    auto loss = [&] {
      kernels::layernorm_forward<double>(y.data(), mean.data(), rstd.data(), x.data(),
                                         gamma.data(), beta.data(), n, h, 1e-5, one_p);
      return test::dot(probe, y);
    };
    loss();
    std::vector<double> dx(n * h, 0.0), dgamma(h, 0.0), dbeta(h, 0.0);
    kernels::layernorm_backward<double>(dx.data(), dgamma.data(), dbeta.data(), probe.data(),
                                        x.data(), gamma.data(), mean.data(), rstd.data(), n, h,
                                        one_p, false);
    CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-7);
    CHECK(test::relative_error(dgamma, test::numeric_gradient(loss, gamma)) < 1e-7);
    CHECK(test::relative_error(dbeta, test::numeric_gradient(loss, beta)) < 1e-7);
  }
}

TEST_CASE("rmsnorm backward matches finite differences, with and without zero-centered gamma") {
  const int n = 4, h = 6;
  for (bool one_p : {false, true}) {
    auto x = test::random_vector(n * h, 6), gamma = test::random_vector(h, 7);
    const auto probe = test::random_vector(n * h, 8);
    std::vector<double> y(n * h), rstd(n);
    auto loss = [&] {
      kernels::rmsnorm_forward<double>(y.data(), rstd.data(), x.data(), gamma.data(), n, h, 1e-5,
                                       one_p);
      return test::dot(probe, y);
    };
    loss();
    std::vector<double> dx(n * h, 1.0), dgamma(h, 0.0);
    kernels::rmsnorm_backward<double>(dx.data(), dgamma.data(), probe.data(), x.data(),
                                      gamma.data(), rstd.data(), n, h, one_p, true);
    for (auto& v : dx) v -= 1.0;  // accumulate_dx added onto ones
    CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-7);
    CHECK(test::relative_error(dgamma, test::numeric_gradient(loss, gamma)) < 1e-7);
  }
}
