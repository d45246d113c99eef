// Ring attention (--cp-comm-type p2p) and Ulysses attention (a2a) on in-process context-parallel
// ranks against the one-rank
// attention kernel on the whole sequence (an independent implementation: it keeps the full
// probability matrix): outputs at each rank's positions, the query gradients there and the key
// and value gradients of the positions a rank owns (their sum over every rank's queries), causal
// with GQA, cp = 2 and 4, with a sliding window, a sink logit and dropout, fp64 and fp32.
#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <thread>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/dropout.hpp"
#include "model/local_group.hpp"
#include "model/ring_attention.hpp"
#include "model/ulysses_attention.hpp"
#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

namespace {

enum class mode { ring, ulysses };

struct variant {
  int window;
  bool sink;
  float dropout;
};

// Rows [position, batch] of a [seq, batch, width] array at the shard's positions, as T.
template <typename T>
std::vector<T> rows_at(const std::vector<double>& a, const model::sequence_shard& shard, int batch, std::int64_t width) {
  std::vector<T> out;
  for (int s : shard.positions())
    for (std::int64_t i = s * batch * width; i < (s + 1) * batch * width; ++i) out.push_back(T(a[std::size_t(i)]));
  return out;
}

// The largest |a - b| over the shard's rows of the one-rank array full.
template <typename T>
double max_error(const std::vector<T>& local, const std::vector<double>& full, const model::sequence_shard& shard,
                 int batch, std::int64_t width) {
  const auto expected = rows_at<double>(full, shard, batch, width);
  double worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::abs(double(local[i]) - expected[i]));
  return worst;
}

template <typename T>
void check_cp_attention(mode m, int cp, variant v, double tolerance) {
  CAPTURE(m == mode::ring, cp, v.window, v.sink, v.dropout);
  kernels::attention_dims full;
  full.seq = 32, full.batch = 2, full.heads = 8, full.groups = 4, full.head_dim = 3;
  full.total_heads = 8, full.window = v.window;
  const std::int64_t width = full.qkv_width(), out_width = full.heads * full.head_dim;
  const auto stream = kernels::dropout_stream(7, 1, 0, 3);
  const double scale = 0.6;
  const auto qkv = test::random_vector(std::size_t(full.seq) * full.batch * width, 31);
  const auto dout = test::random_vector(std::size_t(full.seq) * full.batch * out_width, 32);
  const auto sink_values = test::random_vector(std::size_t(full.heads), 33);

  std::vector<double> out(dout.size()), probs(std::size_t(full.batch) * full.heads * full.seq * full.seq);
  std::vector<double> dqkv(qkv.size()), dsink(std::size_t(full.heads), 0.0);
  const double* sink = v.sink ? sink_values.data() : nullptr;
  kernels::attention_forward<double>(out.data(), probs.data(), qkv.data(), full, scale, v.dropout, stream, sink);
  kernels::attention_backward<double>(dqkv.data(), dout.data(), qkv.data(), probs.data(), full, scale, v.dropout,
                                      stream, sink, v.sink ? dsink.data() : nullptr);

  auto groups = model::make_local_groups(cp);
  std::vector<double> out_error(static_cast<std::size_t>(cp)), grad_error(static_cast<std::size_t>(cp));
  std::vector<std::vector<T>> dsinks(std::size_t(cp), std::vector<T>(std::size_t(full.heads), T(0)));
  std::vector<std::thread> ranks;
  for (int r = 0; r < cp; ++r)
    ranks.emplace_back([&, r] {
      const model::sequence_shard shard{full.seq, cp, r};
      kernels::attention_dims d = full;
      d.seq = shard.local_length();
      auto q_local = rows_at<T>(qkv, shard, full.batch, width);
      auto dout_local = rows_at<T>(dout, shard, full.batch, out_width);
      std::vector<T> sink_t(sink_values.begin(), sink_values.end());
      std::vector<T> o(dout_local.size()), lse(std::size_t(d.seq) * d.batch * d.heads), dq(q_local.size());
      const auto sink_view = v.sink ? tensor::view_of(std::span<const T>(sink_t)) : tensor::const_tensor_view{};
      const auto dsink_view = v.sink ? tensor::view_of(std::span<T>(dsinks[std::size_t(r)])) : tensor::tensor_view{};
      const auto o_view = tensor::view_of(std::span<T>(o)), dq_view = tensor::view_of(std::span<T>(dq));
      const auto q_view = tensor::view_of(std::span<const T>(q_local));
      const auto dout_view = tensor::view_of(std::span<const T>(dout_local));
      model::group& g = *groups[std::size_t(r)];
      if (m == mode::ring) {
        model::ring_attention ring(g, shard);
        ring.forward(o_view, tensor::view_of(std::span<T>(lse)), q_view, d, scale, v.dropout, stream, sink_view);
        ring.backward(dq_view, dout_view, q_view, o_view, tensor::view_of(std::span<const T>(lse)), d, scale,
                      v.dropout, stream, sink_view, dsink_view);
      } else {
        model::ulysses_attention ulysses(g, shard, d.groups);
        ulysses.forward(o_view, q_view, d, scale, v.dropout, stream, sink_view);
        ulysses.backward(dq_view, dout_view, d, scale, v.dropout, stream, sink_view, dsink_view);
      }
      out_error[std::size_t(r)] = max_error(o, out, shard, full.batch, out_width);
      grad_error[std::size_t(r)] = max_error(dq, dqkv, shard, full.batch, width);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < cp; ++r) {
    CAPTURE(r);
    CHECK(out_error[std::size_t(r)] < tolerance);
    CHECK(grad_error[std::size_t(r)] < tolerance);
  }
  if (v.sink)
    for (int h = 0; h < full.heads; ++h) {
      double summed = 0;
      for (int r = 0; r < cp; ++r) summed += double(dsinks[std::size_t(r)][std::size_t(h)]);
      CHECK(std::abs(summed - dsink[std::size_t(h)]) < tolerance);
    }
}

}  // namespace

const std::vector<variant> variants{variant{-1, false, 0.0f}, variant{5, false, 0.0f}, variant{-1, true, 0.0f},
                                    variant{-1, false, 0.25f}, variant{9, true, 0.25f}};

TEST_CASE("ring attention equals one-rank causal attention forward and backward in fp64") {
  for (int cp : {2, 4})
    for (variant v : variants) check_cp_attention<double>(mode::ring, cp, v, 1e-12);
}

TEST_CASE("ring attention equals one-rank causal attention forward and backward in fp32") {
  for (int cp : {2, 4}) check_cp_attention<float>(mode::ring, cp, variant{-1, false, 0.0f}, 1e-5);
}

TEST_CASE("Ulysses attention equals one-rank causal attention forward and backward") {
  for (int cp : {2, 4}) {
    for (variant v : variants) check_cp_attention<double>(mode::ulysses, cp, v, 1e-12);
    check_cp_attention<float>(mode::ulysses, cp, variant{-1, false, 0.0f}, 1e-5);
  }
}

TEST_CASE("Ulysses attention refuses query groups that do not divide over the context-parallel ranks") {
  auto groups = model::make_local_groups(1);
  REQUIRE_THROWS_WITH(model::ulysses_attention(*groups[0], model::sequence_shard{32, 4, 0}, 6),
                      Catch::Contains("--cp-comm-type a2a") && Catch::Contains("divisible by --context-parallel-size=4"));
}
