// RoPE: values against the rotate-half formula, pass-through channels, backward via inverse.
#include "kernels/rope.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

TEST_CASE("rope rotates the first rot_dim channels as x * cos + rotate_half(x) * sin") {
  const int seq = 3, batch = 1, head_dim = 8, rot_dim = 4;  // rotary_percent 0.5
  std::vector<double> cos(seq * rot_dim / 2), sin(seq * rot_dim / 2);
  kernels::rope_tables<double>(cos.data(), sin.data(), seq, rot_dim, 10000.0);
  auto x = test::random_vector(seq * head_dim, 1);
  auto y = x;
  kernels::rope_apply<double>(y.data(), cos.data(), sin.data(), seq, batch, 1, 1, head_dim,
                              rot_dim, head_dim, head_dim, false);
  for (int s = 0; s < seq; ++s) {
    for (int i = 0; i < rot_dim; ++i) {
      const int f = i % (rot_dim / 2);
      const double angle = s / std::pow(10000.0, 2.0 * f / rot_dim);
      const double* xs = &x[s * head_dim];
      const double rotated = i < rot_dim / 2 ? -xs[i + rot_dim / 2] : xs[i - rot_dim / 2];
      CHECK(y[s * head_dim + i] ==
            Approx(xs[i] * std::cos(angle) + rotated * std::sin(angle)).margin(1e-6));
    }
    for (int i = rot_dim; i < head_dim; ++i) CHECK(y[s * head_dim + i] == x[s * head_dim + i]);
  }
}

TEST_CASE("rope backward (the inverse rotation) matches finite differences in the fused layout") {
  // rows of [groups=2, (2 query heads + k + v), head_dim=4]: q and k rotate, v does not.
  const int seq = 3, batch = 2, groups = 2, per_group = 2, head_dim = 4;
  const int group_stride = (per_group + 2) * head_dim, row = groups * group_stride;
  std::vector<double> cos(seq * 2), sin(seq * 2);
  kernels::rope_tables<double>(cos.data(), sin.data(), seq, head_dim, 500.0);
  auto x = test::random_vector(seq * batch * row, 2);
  const auto probe = test::random_vector(x.size(), 3);
  auto loss = [&] {
    auto y = x;
    kernels::rope_apply<double>(y.data(), cos.data(), sin.data(), seq, batch, groups,
                                per_group + 1, head_dim, head_dim, row, group_stride, false);
    return test::dot(probe, y);
  };
  auto dx = probe;
  kernels::rope_apply<double>(dx.data(), cos.data(), sin.data(), seq, batch, groups, per_group + 1,
                              head_dim, head_dim, row, group_stride, true);
  CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-8);
}
