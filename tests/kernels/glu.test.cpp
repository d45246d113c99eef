// The gated linear unit kernel (quick GeLU or SiLU gate, clamp, linear offset): values against
// the formula written out here, backward against finite differences, SiLU without extras
// against the SwiGLU kernel.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "kernels/glu.hpp"
#include "kernels/swiglu.hpp"
#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

namespace {

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// y for one (gate, linear) pair, straight from Megatron's definition.
double expected(double gate, double linear, const kernels::glu_options& o) {
  if (o.clamp) gate = std::min(gate, *o.clamp), linear = std::clamp(linear, -*o.clamp, *o.clamp);
  const double k = o.activation == kernels::glu_activation::quick_gelu ? 1.702 : 1.0;
  return gate * sigmoid(k * gate) * (linear + o.linear_offset);
}

std::vector<kernels::glu_options> variants() {
  using kernels::glu_activation;
  return {{glu_activation::quick_gelu, std::nullopt, 0.0}, {glu_activation::quick_gelu, 0.8, 0.0},
          {glu_activation::quick_gelu, 0.8, 1.0},          {glu_activation::silu, 0.5, -0.3},
          {glu_activation::silu, std::nullopt, 0.7}};
}

}  // namespace

TEST_CASE("glu forward is act(min(gate, c)) * (clamp(linear, -c, c) + offset)") {
  const int n = 3, f = 5;
  const auto x = test::random_vector(n * 2 * f, 11, 1.5);
  for (const auto& o : variants()) {
    std::vector<double> y(n * f);
    kernels::glu_forward<double>(y.data(), x.data(), n, f, o);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < f; ++j)
        CHECK(y[i * f + j] == Approx(expected(x[i * 2 * f + j], x[i * 2 * f + f + j], o)).epsilon(1e-14));
  }
}

TEST_CASE("glu backward matches finite differences, clamped elements passing no gradient") {
  const int n = 4, f = 6;
  for (const auto& o : variants()) {
    auto x = test::random_vector(n * 2 * f, 12, 1.5);
    const auto probe = test::random_vector(n * f, 13);
    auto loss = [&] {
      std::vector<double> y(n * f);
      kernels::glu_forward<double>(y.data(), x.data(), n, f, o);
      return test::dot(probe, y);
    };
    std::vector<double> dx(n * 2 * f);
    kernels::glu_backward<double>(dx.data(), probe.data(), x.data(), n, f, o);
    CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-8);
    if (!o.clamp) continue;
    int clamped = 0;
    for (int i = 0; i < n * 2 * f; ++i) {
      const bool linear_half = i % (2 * f) >= f;
      if (x[i] <= *o.clamp && (!linear_half || x[i] >= -*o.clamp)) continue;
      CHECK(dx[i] == 0.0);
      ++clamped;
    }
    CHECK(clamped > 0);  // the test reaches the clamped branch
  }
}

TEST_CASE("glu with SiLU, no clamp and no offset is the SwiGLU kernel") {
  const int n = 3, f = 4;
  const auto x = test::random_vector(n * 2 * f, 14, 1.5), dy = test::random_vector(n * f, 15);
  std::vector<double> y(n * f), y_ref(n * f), dx(n * 2 * f), dx_ref(n * 2 * f);
  kernels::glu_forward<double>(y.data(), x.data(), n, f, {});
  kernels::swiglu_forward<double>(y_ref.data(), x.data(), n, f);
  kernels::glu_backward<double>(dx.data(), dy.data(), x.data(), n, f, {});
  kernels::swiglu_backward<double>(dx_ref.data(), dy.data(), x.data(), n, f);
  CHECK(test::relative_error(y, y_ref) < 1e-14);
  CHECK(test::relative_error(dx, dx_ref) < 1e-14);
}
