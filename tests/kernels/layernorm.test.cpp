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

namespace {

// The tensor entry points on float rows: fused (dx and the weight gradients at once) against the
// split a zero-bubble backward makes (dx alone, then the weight gradients alone), bit for bit.
template <class Backward>
void check_split_equals_fused(int n, int h, bool with_bias, const Backward& backward) {
  auto random_floats = [](int count, std::uint64_t seed) {
    const auto d = test::random_vector(count, seed);
    return std::vector<float>(d.begin(), d.end());
  };
  const auto dy = random_floats(n * h, 11);
  std::vector<float> dx_fused(n * h, 0.5f), dg_fused(h, 0.25f), db_fused(h, 0.125f);
  auto dx_split = dx_fused, dg_split = dg_fused, db_split = db_fused;
  using tensor::view_of;
  auto bias = [&](std::vector<float>& db) { return with_bias ? view_of(std::span<float>(db)) : tensor::tensor_view{}; };
  backward(view_of(std::span<float>(dx_fused)), view_of(std::span<float>(dg_fused)), bias(db_fused), dy);
  backward(view_of(std::span<float>(dx_split)), tensor::tensor_view{}, tensor::tensor_view{}, dy);
  CHECK(dg_split == std::vector<float>(h, 0.25f));  // untouched by the input-gradient pass
  backward(tensor::tensor_view{}, view_of(std::span<float>(dg_split)), bias(db_split), dy);
  CHECK(dx_split == dx_fused);
  CHECK(dg_split == dg_fused);
  CHECK(db_split == db_fused);
  CHECK(dg_fused != std::vector<float>(h, 0.25f));
}

}  // namespace

TEST_CASE("a norm's input and weight gradients computed apart equal the fused backward's bit for bit") {
  // 64 x 512 rows run on every OpenMP thread, 3 x 8 on one.
  for (auto [n, h] : {std::pair{3, 8}, std::pair{64, 512}})
    for (bool one_p : {false, true}) {
      INFO("n=" << n << " h=" << h << " one_p=" << one_p);
      const auto x64 = test::random_vector(n * h, 12), g64 = test::random_vector(h, 13), b64 = test::random_vector(h, 14);
      const std::vector<float> x(x64.begin(), x64.end()), gamma(g64.begin(), g64.end()), beta(b64.begin(), b64.end());
      std::vector<float> y(n * h), mean(n), rstd(n);
      using tensor::view_of;
      kernels::layernorm_forward<float>(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), n, h,
                                        1e-5f, one_p);
      for (bool with_bias : {true, false})
        check_split_equals_fused(n, h, with_bias, [&](auto dx, auto dg, auto db, const std::vector<float>& dy) {
          kernels::layernorm_backward(dx, dg, db, view_of(std::span<const float>(dy)), view_of(std::span<const float>(x)),
                                      view_of(std::span<const float>(gamma)), view_of(std::span<const float>(mean)),
                                      view_of(std::span<const float>(rstd)), n, h, one_p, true);
        });
      kernels::rmsnorm_forward<float>(y.data(), rstd.data(), x.data(), gamma.data(), n, h, 1e-5f, one_p);
      check_split_equals_fused(n, h, false, [&](auto dx, auto dg, auto, const std::vector<float>& dy) {
        kernels::rmsnorm_backward(dx, dg, view_of(std::span<const float>(dy)), view_of(std::span<const float>(x)),
                                  view_of(std::span<const float>(gamma)), view_of(std::span<const float>(rstd)), n, h,
                                  one_p, true);
      });
    }
  // Neither part asked for is a caller's mistake.
  std::vector<float> v(8);
  const auto c = tensor::view_of(std::span<const float>(v));
  CHECK_THROWS_WITH(kernels::rmsnorm_backward({}, {}, c, c, c, tensor::view_of(std::span<const float>(v.data(), 1)), 1, 8,
                                              false, false),
                    Catch::Contains("neither dx nor dgamma"));
}
