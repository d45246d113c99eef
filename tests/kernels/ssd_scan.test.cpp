// The chunked SSD scan against the sequential recurrence it factors, written out here step by
// step: forward for several chunk lengths (one not dividing the sequence), backward against
// finite differences of the sequential form in double precision.
#include "kernels/ssd_scan.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <utility>
#include <vector>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

namespace {

struct scan_inputs {
  std::vector<double> x, dt, A_log, B, C, D, dt_bias;
  explicit scan_inputs(const kernels::ssd_shape& s) {
    const int rows = s.batch * s.seq;
    x = test::random_vector(std::size_t(rows) * s.heads * s.head_dim, 11);
    dt = test::random_vector(std::size_t(rows) * s.heads, 12);
    B = test::random_vector(std::size_t(rows) * s.groups * s.state, 13);
    C = test::random_vector(std::size_t(rows) * s.groups * s.state, 14);
    A_log = test::random_vector(s.heads, 15, 0.5);
    D = test::random_vector(s.heads, 16);
    dt_bias = test::random_vector(s.heads, 17, 0.5);
  }
};

// h_t = exp(dt A) h_{t-1} + dt x_t B_t^T, y_t = h_t C_t + D x_t, one (batch, head) at a time.
std::vector<double> sequential_scan(const scan_inputs& in, const kernels::ssd_shape& s) {
  const int P = s.head_dim, N = s.state, H = s.heads, G = s.groups;
  std::vector<double> y(in.x.size());
  for (int b = 0; b < s.batch; ++b)
    for (int hd = 0; hd < H; ++hd) {
      const int g = hd / (H / G);
      const double A = -std::exp(in.A_log[hd]);
      std::vector<double> h(std::size_t(P) * N, 0.0);
      for (int t = 0; t < s.seq; ++t) {
        const std::size_t r = std::size_t(b) * s.seq + t;
        const double u = in.dt[r * H + hd] + in.dt_bias[hd];
        const double dt = std::log1p(std::exp(u)), decay = std::exp(dt * A);
        const double* xt = &in.x[(r * H + hd) * P];
        const double* Bt = &in.B[(r * G + g) * N];
        const double* Ct = &in.C[(r * G + g) * N];
        for (int p = 0; p < P; ++p) {
          double acc = 0;
          for (int n = 0; n < N; ++n) {
            double& hpn = h[std::size_t(p) * N + n];
            hpn = decay * hpn + dt * xt[p] * Bt[n];
            acc += hpn * Ct[n];
          }
          y[(r * H + hd) * P + p] = acc + in.D[hd] * xt[p];
        }
      }
    }
  return y;
}

template <typename T>
std::vector<T> chunked_scan(const scan_inputs& in, const kernels::ssd_shape& s) {
  auto cast = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  const auto x = cast(in.x), dt = cast(in.dt), A_log = cast(in.A_log), B = cast(in.B);
  const auto C = cast(in.C), D = cast(in.D), bias = cast(in.dt_bias);
  std::vector<T> y(x.size()), states(s.states_size());
  kernels::ssd_scan_forward<T>(y.data(), states.data(), x.data(), dt.data(), A_log.data(),
                               B.data(), C.data(), D.data(), bias.data(), s);
  return y;
}

}  // namespace

TEST_CASE("chunked SSD scan equals the sequential recurrence for every chunk length") {
  for (int chunk : {1, 2, 3, 4, 7, 8, 16}) {
    const kernels::ssd_shape s{.batch = 2, .seq = 13, .heads = 4, .head_dim = 3, .groups = 2,
                               .state = 5, .chunk = chunk};
    const scan_inputs in(s);
    const auto want = sequential_scan(in, s);
    INFO("chunk " << chunk);
    CHECK(test::relative_error(chunked_scan<double>(in, s), want) < 1e-12);
    CHECK(test::relative_error(chunked_scan<float>(in, s), want) < 1e-5);
  }
}

TEST_CASE("chunked SSD scan in fp32 still matches when decays inside a chunk fall below exp(-60)") {
  const kernels::ssd_shape s{.batch = 1, .seq = 40, .heads = 2, .head_dim = 3, .groups = 1,
                             .state = 4, .chunk = 32};
  scan_inputs in(s);
  for (auto& a : in.A_log) a += 3.0;   // A ~ -20: a chunk's log-decay reaches hundreds
  for (auto& b : in.dt_bias) b += 1.0;
  CHECK(test::relative_error(chunked_scan<float>(in, s), sequential_scan(in, s)) < 1e-5);
}

TEST_CASE("chunked SSD scan backward matches finite differences of the sequential recurrence") {
  const std::pair<int, int> chunk_and_groups[] = {{3, 2}, {4, 1}, {16, 4}, {5, 2}};
  for (const auto& [chunk, groups] : chunk_and_groups) {
    const kernels::ssd_shape s{.batch = 2, .seq = 10, .heads = 4, .head_dim = 3,
                               .groups = groups, .state = 4, .chunk = chunk};
    scan_inputs in(s);
    const auto probe = test::random_vector(in.x.size(), 18);
    auto loss = [&] { return test::dot(probe, sequential_scan(in, s)); };
    std::vector<double> y(in.x.size()), states(s.states_size());
    kernels::ssd_scan_forward<double>(y.data(), states.data(), in.x.data(), in.dt.data(),
                                      in.A_log.data(), in.B.data(), in.C.data(), in.D.data(),
                                      in.dt_bias.data(), s);
    std::vector<double> dx(in.x.size()), ddt(in.dt.size()), dB(in.B.size()), dC(in.C.size());
    std::vector<double> dA_log(s.heads, 1.0), dD(s.heads, 1.0), dbias(s.heads, 1.0);
    kernels::ssd_scan_backward<double>(dx.data(), ddt.data(), dA_log.data(), dB.data(),
                                       dC.data(), dD.data(), dbias.data(), probe.data(),
                                       states.data(), in.x.data(), in.dt.data(),
                                       in.A_log.data(), in.B.data(), in.C.data(), in.D.data(),
                                       in.dt_bias.data(), s);
    for (int hd = 0; hd < s.heads; ++hd) dA_log[hd] -= 1, dD[hd] -= 1, dbias[hd] -= 1;  // +=
    INFO("chunk " << chunk << " groups " << groups);
    CHECK(test::relative_error(dx, test::numeric_gradient(loss, in.x)) < 1e-7);
    CHECK(test::relative_error(ddt, test::numeric_gradient(loss, in.dt)) < 1e-7);
    CHECK(test::relative_error(dB, test::numeric_gradient(loss, in.B)) < 1e-7);
    CHECK(test::relative_error(dC, test::numeric_gradient(loss, in.C)) < 1e-7);
    CHECK(test::relative_error(dA_log, test::numeric_gradient(loss, in.A_log)) < 1e-7);
    CHECK(test::relative_error(dD, test::numeric_gradient(loss, in.D)) < 1e-7);
    CHECK(test::relative_error(dbias, test::numeric_gradient(loss, in.dt_bias)) < 1e-7);
  }
}
