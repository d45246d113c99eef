// Gated grouped RMSNorm (norm after the gate): forward against the formula written out here,
// backward against finite differences in double precision.
#include "kernels/gated_rmsnorm.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

namespace {

std::vector<double> reference_norm(const std::vector<double>& x, const std::vector<double>& z,
                                   const std::vector<double>& weight, int n, int d, int gs,
                                   double eps) {
  std::vector<double> y(x.size());
  for (int i = 0; i < n; ++i)
    for (int g0 = 0; g0 < d; g0 += gs) {
      double ms = 0;
      for (int j = g0; j < g0 + gs; ++j) {
        const double zz = z[i * d + j], gated = x[i * d + j] * zz / (1 + std::exp(-zz));
        y[i * d + j] = gated;
        ms += gated * gated / gs;
      }
      for (int j = g0; j < g0 + gs; ++j) y[i * d + j] *= weight[j] / std::sqrt(ms + eps);
    }
  return y;
}

}  // namespace

TEST_CASE("gated rmsnorm normalises x times silu of z over each group") {
  const int n = 3, d = 12, gs = 4;
  const auto x = test::random_vector(n * d, 31), z = test::random_vector(n * d, 32);
  const auto weight = test::random_vector(d, 33);
  std::vector<double> y(x.size()), rstd(n * d / gs);
  kernels::gated_rmsnorm_forward<double>(y.data(), rstd.data(), x.data(), z.data(),
                                         weight.data(), n, d, gs, 1e-5);
  CHECK(test::relative_error(y, reference_norm(x, z, weight, n, d, gs, 1e-5)) < 1e-14);
}

TEST_CASE("gated rmsnorm backward matches finite differences for one and several groups") {
  for (int gs : {6, 3}) {
    const int n = 3, d = 6;
    auto x = test::random_vector(n * d, 34), z = test::random_vector(n * d, 35);
    auto weight = test::random_vector(d, 36);
    const auto probe = test::random_vector(x.size(), 37);
    auto loss = [&] { return test::dot(probe, reference_norm(x, z, weight, n, d, gs, 1e-5)); };
    std::vector<double> y(x.size()), rstd(n * d / gs), dx(x.size()), dz(x.size());
    std::vector<double> dweight(d, 0.0);
    kernels::gated_rmsnorm_forward<double>(y.data(), rstd.data(), x.data(), z.data(),
                                           weight.data(), n, d, gs, 1e-5);
    kernels::gated_rmsnorm_backward<double>(dx.data(), dz.data(), dweight.data(), probe.data(),
                                            x.data(), z.data(), weight.data(), rstd.data(), n, d,
                                            gs);
    INFO("group size " << gs);
    CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-7);
    CHECK(test::relative_error(dz, test::numeric_gradient(loss, z)) < 1e-7);
    CHECK(test::relative_error(dweight, test::numeric_gradient(loss, weight)) < 1e-7);
  }
}

// A zero-bubble backward runs dx and dz first and the weight's gradient later: each part alone
// gives the joint call's bits, in fp32 and with several threads (large enough to split rows).
TEST_CASE("gated rmsnorm backward split into dx dz and dweight gives the joint call's bits") {
  const int n = 300, d = 96, gs = 32;
  const auto x64 = test::random_vector(n * d, 41), z64 = test::random_vector(n * d, 42);
  const auto w64 = test::random_vector(d, 43), dy64 = test::random_vector(n * d, 44);
  const std::vector<float> x(x64.begin(), x64.end()), z(z64.begin(), z64.end()), w(w64.begin(), w64.end()),
      dy(dy64.begin(), dy64.end());
  std::vector<float> y(x.size()), rstd(n * d / gs);
  kernels::gated_rmsnorm_forward<float>(y.data(), rstd.data(), x.data(), z.data(), w.data(), n, d, gs, 1e-5f);
  std::vector<float> dx(x.size()), dz(x.size()), dweight(d, 0.25f);
  kernels::gated_rmsnorm_backward<float>(dx.data(), dz.data(), dweight.data(), dy.data(), x.data(), z.data(), w.data(),
                                         rstd.data(), n, d, gs);
  std::vector<float> dx_alone(x.size()), dz_alone(x.size()), dweight_alone(d, 0.25f);
  kernels::gated_rmsnorm_backward<float>(dx_alone.data(), dz_alone.data(), nullptr, dy.data(), x.data(), z.data(),
                                         w.data(), rstd.data(), n, d, gs);
  kernels::gated_rmsnorm_backward<float>(nullptr, nullptr, dweight_alone.data(), dy.data(), x.data(), z.data(),
                                         w.data(), rstd.data(), n, d, gs);
  CHECK(dx_alone == dx);
  CHECK(dz_alone == dz);
  CHECK(dweight_alone == dweight);
}
