// Dropout: keep rate, scaling, determinism, and bias-dropout-add's backward.
#include "kernels/dropout.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

TEST_CASE("dropout keeps about 1 - p of the elements and scales them by 1 / (1 - p)") {
  const int n = 200000;
  const float p = 0.3f;
  std::vector<float> x(n, 1.0f), y(n);
  kernels::dropout_apply<float>(y.data(), x.data(), n, p, kernels::dropout_stream(1234, 0, 0, 0));
  int kept = 0;
  for (float v : y) {
    if (v != 0.0f) {
      ++kept;
      CHECK(v == Approx(1.0f / 0.7f));
    }
  }
  CHECK(std::abs(kept / double(n) - 0.7) < 0.005);
}

TEST_CASE("dropout masks repeat for the same stream and differ between streams") {
  std::vector<double> x = test::random_vector(1000, 1), a(1000), b(1000), c(1000);
  kernels::dropout_apply<double>(a.data(), x.data(), 1000, 0.5f, kernels::dropout_stream(7, 1, 2, 3));
  kernels::dropout_apply<double>(b.data(), x.data(), 1000, 0.5f, kernels::dropout_stream(7, 1, 2, 3));
  kernels::dropout_apply<double>(c.data(), x.data(), 1000, 0.5f, kernels::dropout_stream(7, 1, 2, 4));
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("bias-dropout-add backward matches finite differences") {
  const int n = 4, w = 5;
  const float p = 0.4f;
  const auto stream = kernels::dropout_stream(3, 0, 1, 0);
  auto x = test::random_vector(n * w, 2), bias = test::random_vector(w, 3);
  auto residual = test::random_vector(n * w, 4);
  const auto probe = test::random_vector(n * w, 5);
  auto loss = [&] {
    std::vector<double> out(n * w);
    kernels::bias_dropout_add<double>(out.data(), residual.data(), x.data(), bias.data(), n, w, p,
                                      stream);
    return test::dot(probe, out);
  };
  std::vector<double> dx(n * w);
  kernels::dropout_apply<double>(dx.data(), probe.data(), n * w, p, stream);
  CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-8);
  CHECK(test::relative_error(probe, test::numeric_gradient(loss, residual)) < 1e-8);
}

TEST_CASE("bias-dropout-add on a block of rows given its first element draws the whole tensor's mask") {
  // A sequence-parallel shard is a block of rows: with its first element index it must keep
  // exactly the elements the unsplit call keeps.
  const int n = 6, w = 7, first_row = 2, rows = 3;
  const float p = 0.5f;
  const auto stream = kernels::dropout_stream(5, 2, 1, 3);
  const auto x = test::random_vector(n * w, 6), bias = test::random_vector(w, 7);
  const auto residual = test::random_vector(n * w, 8);
  std::vector<double> whole(n * w), block(rows * w);
  kernels::bias_dropout_add<double>(whole.data(), residual.data(), x.data(), bias.data(), n, w, p, stream);
  const std::size_t at = std::size_t(first_row) * w;
  kernels::bias_dropout_add<double>(block.data(), residual.data() + at, x.data() + at, bias.data(), rows, w, p,
                                    stream, at);
  CHECK(std::equal(block.begin(), block.end(), whole.begin() + std::ptrdiff_t(at)));
  std::vector<double> unshifted(rows * w);
  kernels::bias_dropout_add<double>(unshifted.data(), residual.data() + at, x.data() + at, bias.data(), rows, w, p,
                                    stream);
  CHECK_FALSE(std::equal(unshifted.begin(), unshifted.end(), whole.begin() + std::ptrdiff_t(at)));
}
