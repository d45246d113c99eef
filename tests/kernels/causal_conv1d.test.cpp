// Causal depthwise conv1d: forward against the padded-convolution definition written out here,
// backward against finite differences in double precision.
#include "kernels/causal_conv1d.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

namespace {

// torch.nn.Conv1d(groups=c, padding=k-1) on [b, c, l], cut to l, then SiLU, on [b, l, c] data.
std::vector<double> reference_conv(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& bias, int b, int l, int c, int k) {
  std::vector<double> y(x.size());
  for (int bi = 0; bi < b; ++bi)
    for (int ci = 0; ci < c; ++ci)
      for (int t = 0; t < l; ++t) {
        double u = bias[ci];
        for (int tap = 0; tap < k; ++tap) {
          const int padded = t + tap;  // index into x padded with k-1 zeros in front
          if (padded >= k - 1) u += w[ci * k + tap] * x[(std::size_t(bi) * l + padded - (k - 1)) * c + ci];
        }
        y[(std::size_t(bi) * l + t) * c + ci] = u / (1 + std::exp(-u));
      }
  return y;
}

}  // namespace

TEST_CASE("causal conv1d forward equals the padded depthwise convolution with SiLU") {
  const int b = 2, l = 9, c = 5, k = 4;
  const auto x = test::random_vector(b * l * c, 21), w = test::random_vector(c * k, 22);
  const auto bias = test::random_vector(c, 23);
  std::vector<double> y(x.size());
  kernels::causal_conv1d_forward<double>(y.data(), x.data(), w.data(), bias.data(), b, l, c, k,
                                         true);
  CHECK(test::relative_error(y, reference_conv(x, w, bias, b, l, c, k)) < 1e-14);
}

TEST_CASE("causal conv1d backward matches finite differences") {
  const int b = 2, l = 7, c = 3, k = 4;
  auto x = test::random_vector(b * l * c, 24), w = test::random_vector(c * k, 25);
  auto bias = test::random_vector(c, 26);
  const auto probe = test::random_vector(x.size(), 27);
  auto loss = [&] { return test::dot(probe, reference_conv(x, w, bias, b, l, c, k)); };
  std::vector<double> dx(x.size()), dw(w.size(), 0.0), dbias(c, 0.0);
  kernels::causal_conv1d_backward<double>(dx.data(), dw.data(), dbias.data(), probe.data(),
                                          x.data(), w.data(), bias.data(), b, l, c, k, true);
  CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-7);
  CHECK(test::relative_error(dw, test::numeric_gradient(loss, w)) < 1e-7);
  CHECK(test::relative_error(dbias, test::numeric_gradient(loss, bias)) < 1e-7);
}

// A zero-bubble backward runs dx first and the weight's and bias's gradients later: each part
// alone gives the joint call's bits, in fp32 and with several threads.
TEST_CASE("causal conv1d backward split into dx and dw dbias gives the joint call's bits") {
  const int b = 2, l = 150, c = 40, k = 4;
  const auto to_f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto x = to_f(test::random_vector(b * l * c, 51)), w = to_f(test::random_vector(c * k, 52));
  const auto bias = to_f(test::random_vector(c, 53)), dy = to_f(test::random_vector(b * l * c, 54));
  std::vector<float> dx(x.size()), dw(w.size(), 0.5f), dbias(c, 0.5f);
  kernels::causal_conv1d_backward<float>(dx.data(), dw.data(), dbias.data(), dy.data(), x.data(), w.data(), bias.data(),
                                         b, l, c, k, true);
  std::vector<float> dx_alone(x.size()), dw_alone(w.size(), 0.5f), dbias_alone(c, 0.5f);
  kernels::causal_conv1d_backward<float>(dx_alone.data(), nullptr, nullptr, dy.data(), x.data(), w.data(),
                                         bias.data(), b, l, c, k, true);
  kernels::causal_conv1d_backward<float>(nullptr, dw_alone.data(), dbias_alone.data(), dy.data(), x.data(), w.data(),
                                         bias.data(), b, l, c, k, true);
  CHECK(dx_alone == dx);
  CHECK(dw_alone == dw);
  CHECK(dbias_alone == dbias);
}
