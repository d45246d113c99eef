// RoPE: values against the rotate-half and interleaved formulas, pass-through channels, backward
// via the inverse, the interpolated positions and Llama 3.1's frequency scaling.
#include "kernels/rope.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

TEST_CASE("rope rotates the first rot_dim channels as x * cos + rotate_half(x) * sin") {
  const int seq = 3, batch = 1, head_dim = 8, rot_dim = 4;  // rotary_percent 0.5
  std::vector<double> cos(seq * rot_dim / 2), sin(seq * rot_dim / 2);
  kernels::rope_tables<double>(cos.data(), sin.data(), seq, rot_dim, kernels::rope_frequencies{});
  auto x = test::random_vector(seq * head_dim, 1);
  auto y = x;
  kernels::rope_apply<double>(y.data(), cos.data(), sin.data(), seq, batch, 1, 1, head_dim,
                              rot_dim, head_dim, head_dim, false, false);
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
  kernels::rope_frequencies f;
  f.base = 500.0;
  kernels::rope_tables<double>(cos.data(), sin.data(), seq, head_dim, f);
  auto x = test::random_vector(seq * batch * row, 2);
  const auto probe = test::random_vector(x.size(), 3);
  for (bool interleaved : {false, true}) {
    INFO("interleaved " << interleaved);
    auto loss = [&] {
      auto y = x;
      kernels::rope_apply<double>(y.data(), cos.data(), sin.data(), seq, batch, groups,
                                  per_group + 1, head_dim, head_dim, row, group_stride, interleaved,
                                  false);
      return test::dot(probe, y);
    };
    auto dx = probe;
    kernels::rope_apply<double>(dx.data(), cos.data(), sin.data(), seq, batch, groups,
                                per_group + 1, head_dim, head_dim, row, group_stride, interleaved,
                                true);
    CHECK(test::relative_error(dx, test::numeric_gradient(loss, x)) < 1e-8);
  }
}

TEST_CASE("interleaved rope rotates pairs (x[2i], x[2i+1]) by position * inv_freq[i]") {
  const int seq = 4, head_dim = 6, rot_dim = 4;
  kernels::rope_frequencies f;
  f.base = 100.0;
  std::vector<double> cos(seq * rot_dim / 2), sin(seq * rot_dim / 2);
  kernels::rope_tables<double>(cos.data(), sin.data(), seq, rot_dim, f);
  const auto x = test::random_vector(seq * head_dim, 4);
  auto y = x;
  kernels::rope_apply<double>(y.data(), cos.data(), sin.data(), seq, 1, 1, 1, head_dim, rot_dim,
                              head_dim, head_dim, true, false);
  for (int s = 0; s < seq; ++s) {
    const double* xs = &x[s * head_dim];
    const double* ys = &y[s * head_dim];
    for (int i = 0; i < rot_dim / 2; ++i) {
      const double angle = s / std::pow(100.0, 2.0 * i / rot_dim);
      CHECK(ys[2 * i] == Approx(xs[2 * i] * std::cos(angle) - xs[2 * i + 1] * std::sin(angle)).margin(1e-6));
      CHECK(ys[2 * i + 1] == Approx(xs[2 * i + 1] * std::cos(angle) + xs[2 * i] * std::sin(angle)).margin(1e-6));
    }
    for (int i = rot_dim; i < head_dim; ++i) CHECK(ys[i] == xs[i]);
  }
}

TEST_CASE("rope positions are divided by the sequence-length interpolation factor") {
  const int seq = 6, rot_dim = 4;
  kernels::rope_frequencies plain, stretched;
  stretched.seq_len_interpolation_factor = 3.0;
  std::vector<double> c1(seq * 2), s1(seq * 2), c3(seq * 2), s3(seq * 2);
  kernels::rope_tables<double>(c1.data(), s1.data(), seq, rot_dim, plain);
  kernels::rope_tables<double>(c3.data(), s3.data(), seq, rot_dim, stretched);
  for (int s = 0; s < seq; ++s)
    for (int i = 0; i < 2; ++i) {
      const double angle = s / 3.0 / std::pow(10000.0, 2.0 * i / rot_dim);
      CHECK(c3[s * 2 + i] == Approx(std::cos(angle)).margin(1e-6));
      CHECK(s3[s * 2 + i] == Approx(std::sin(angle)).margin(1e-6));
    }
  CHECK(c3[3 * 2] == Approx(c1[1 * 2]).margin(1e-7));  // position 3 / 3 is position 1
}

TEST_CASE("Llama 3.1 rope scaling: long wavelengths divided by the factor, short kept, the middle blended") {
  // base 1e6 over 16 channels: wavelengths from 2 pi to ~1.8e5 cover all three bands of 2048 and
  // 8192 (original_max_position_embeddings 8192 / high_freq_factor 4 and / low_freq_factor 1).
  const int rot_dim = 16;
  kernels::rope_frequencies f;
  f.base = 1e6, f.llama3_scaling = true, f.scaling_factor = 8.0;
  const auto scaled = kernels::rope_inverse_frequencies(rot_dim, f);
  int low = 0, mid = 0, high = 0;
  for (int i = 0; i < rot_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(1e6, 2.0 * i / rot_dim);
    const double wavelen = 2 * M_PI / freq;
    double want = freq;
    if (wavelen > 8192) want = freq / 8, ++low;
    else if (wavelen >= 2048) {
      const double smooth = (8192 / wavelen - 1) / 3;
      want = (1 - smooth) * freq / 8 + smooth * freq, ++mid;
    } else ++high;
    INFO("i " << i << " wavelength " << wavelen);
    CHECK(scaled[std::size_t(i)] == Approx(want).epsilon(1e-6));
  }
  CHECK(low > 0);
  CHECK(mid > 0);
  CHECK(high > 0);
}
