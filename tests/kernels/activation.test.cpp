// GeLU (erf and tanh), SwiGLU and bias backward against finite differences; GeLU values
// against known points.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/bias.hpp"
#include "kernels/gelu.hpp"
#include "kernels/swiglu.hpp"
#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

TEST_CASE("gelu matches x * Phi(x) and its tanh form matches the published approximation") {
  const std::vector<double> x = {-2.0, -0.5, 0.0, 0.7, 3.0};
  std::vector<double> exact(5), approx(5);
  kernels::gelu_forward<double>(exact.data(), x.data(), 5, false);
  kernels::gelu_forward<double>(approx.data(), x.data(), 5, true);
  for (int i = 0; i < 5; ++i) {
    CHECK(exact[i] == Approx(x[i] * 0.5 * std::erfc(-x[i] / std::sqrt(2.0))).epsilon(1e-14));
    const double u = std::sqrt(2.0 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
    CHECK(approx[i] == Approx(0.5 * x[i] * (1 + std::tanh(u))).epsilon(1e-14));
  }
}

TEST_CASE("gelu backward matches finite differences in both forms") {
  for (bool tanh_form : {false, true}) {
    auto x = test::random_vector(20, 1, 2.0);
    const auto probe = test::random_vector(20, 2);
    auto loss = [&] {
      std::vector<double> y(20);
      kernels::gelu_forward<double>(y.data(), x.data(), 20, tanh_form);
      return test::dot(probe, y);
    };
    std::vector<double> dx(20);
    kernels::gelu_backward<double>(dx.data(), probe.data(), x.data(), 20, tanh_form);
    CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-8);
  }
}

TEST_CASE("swiglu backward matches finite differences") {
  const int n = 3, f = 4;
  auto x = test::random_vector(n * 2 * f, 3, 1.5);
  const auto probe = test::random_vector(n * f, 4);
  auto loss = [&] {
    std::vector<double> y(n * f);
    kernels::swiglu_forward<double>(y.data(), x.data(), n, f);
    return test::dot(probe, y);
  };
  std::vector<double> dx(n * 2 * f);
  kernels::swiglu_backward<double>(dx.data(), probe.data(), x.data(), n, f);
  CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-8);
}

TEST_CASE("bias backward is the finite-difference gradient of bias add") {
  const int n = 5, w = 3;
  auto bias = test::random_vector(w, 5);
  const auto y0 = test::random_vector(n * w, 6), probe = test::random_vector(n * w, 7);
  auto loss = [&] {
    auto y = y0;
    kernels::bias_add<double>(y.data(), bias.data(), n, w);
    return test::dot(probe, y);
  };
  std::vector<double> dbias(w, 0.0);
  kernels::bias_backward<double>(dbias.data(), probe.data(), n, w);
  CHECK(test::relative_error(dbias, test::numeric_gradient(loss, bias)) < 1e-8);
}

TEST_CASE("float gelu (SIMD path) agrees with the double reference in both forms") {
  const int n = 5000;
  const auto xd = test::random_vector(n, 9, 3.0), gd = test::random_vector(n, 10);
  const std::vector<float> xf(xd.begin(), xd.end()), gf(gd.begin(), gd.end());
  for (bool tanh_form : {false, true}) {
    std::vector<double> yd(n), dd(n);
    std::vector<float> yf(n), df(n);
    const std::vector<double> xr(xf.begin(), xf.end()), gr(gf.begin(), gf.end());
    kernels::gelu_forward<double>(yd.data(), xr.data(), n, tanh_form);
    kernels::gelu_backward<double>(dd.data(), gr.data(), xr.data(), n, tanh_form);
    kernels::gelu_forward<float>(yf.data(), xf.data(), n, tanh_form);
    kernels::gelu_backward<float>(df.data(), gf.data(), xf.data(), n, tanh_form);
    CHECK(test::relative_error(yf, yd) < 1e-6);
    CHECK(test::relative_error(df, dd) < 1e-6);
  }
}
