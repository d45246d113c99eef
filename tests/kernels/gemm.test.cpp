// GEMM against a naive triple loop, and the linear-layer products against finite differences.
#include "kernels/gemm.hpp"

#include <catch2/catch.hpp>
#include <tuple>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

TEST_CASE("gemm matches a naive product for every transpose combination") {
  const int m = 5, n = 7, k = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto a = test::random_vector(m * k, 1), b = test::random_vector(k * n, 2);
      auto c = test::random_vector(m * n, 3), expect = c;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int p = 0; p < k; ++p)
            s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
          expect[i * n + j] = 2.0 * s + 0.5 * expect[i * n + j];
        }
      kernels::gemm<double>(ta, tb, m, n, k, 2.0, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.5,
                            c.data(), n);
      CHECK(test::relative_error(c, expect) < 1e-14);
    }
}

TEST_CASE("linear backward gives the finite-difference gradients of input and weight") {
  const int rows = 4, in = 3, out = 5;
  auto x = test::random_vector(rows * in, 4), w = test::random_vector(out * in, 5);
  const auto probe = test::random_vector(rows * out, 6);
  auto loss = [&] {
    std::vector<double> y(rows * out);
    kernels::linear_forward<double>(x.data(), w.data(), y.data(), rows, in, out);
    return test::dot(probe, y);
  };
  std::vector<double> dx(rows * in), dw(out * in, 0.0);
  kernels::linear_backward_input<double>(probe.data(), w.data(), dx.data(), rows, in, out);
  kernels::linear_backward_weight<double>(probe.data(), x.data(), dw.data(), rows, in, out);
  CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-8);
  CHECK(test::relative_error(dw, test::numeric_gradient(loss, w)) < 1e-8);
}

TEST_CASE("large float gemms split over threads match a naive product for every layout") {
  // Big enough that gemm() splits rows (m >= n) or columns (n > m) across the OpenMP team.
  for (auto [m, n, k] : {std::tuple{301, 97, 150}, std::tuple{90, 333, 140}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const auto ad = test::random_vector(std::size_t(m) * k, 7);
        const auto bd = test::random_vector(std::size_t(k) * n, 8);
        const std::vector<float> a(ad.begin(), ad.end()), b(bd.begin(), bd.end());
        std::vector<float> c(std::size_t(m) * n, 1.0f);
        std::vector<double> expect(c.size());
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            double s = 0;
            for (int p = 0; p < k; ++p)
              s += double(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
            expect[std::size_t(i) * n + j] = s + 1.0;
          }
        kernels::gemm<float>(ta, tb, m, n, k, 1.0f, a.data(), ta ? m : k, b.data(), tb ? k : n,
                             1.0f, c.data(), n);
        CHECK(test::relative_error(c, expect) < 1e-5);
      }
}
