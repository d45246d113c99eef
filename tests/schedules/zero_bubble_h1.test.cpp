// Tests for schedules/zero_bubble_h1.hpp: hand-derived orders, 1F1B's transfers untouched, the
// in-flight bound, and the bubble of a virtual-time replay against the paper's formula.
#include "schedules/zero_bubble_h1.hpp"

#include <catch2/catch.hpp>

#include "schedules/one_f_one_b.hpp"
#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

namespace {
schedule_shape zb(int pp, int rank, int m) {
  return {.pipeline_model_parallel_size = pp, .pipeline_rank = rank, .num_microbatches = m,
          .kind = schedule_kind::zero_bubble_h1};
}

std::vector<action> without_weight_passes(const std::vector<action>& in) {
  std::vector<action> out;
  for (const action& a : in)
    if (a.kind != op::backward_weight) out.push_back(a);
  return out;
}
}  // namespace

TEST_CASE("the last of four stages runs three weight passes late, in the bubble 1F1B leaves at the end") {
  CHECK(text(compute_only(collect(zero_bubble_h1(zb(4, 3, 6))))) ==
        actions("F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5"));
}

TEST_CASE("the first stage runs each weight pass right after its backward, after the transfers that follow it") {
  CHECK(text(collect(zero_bubble_h1(zb(2, 0, 3)))) ==
        actions("F0 SF0 F1 SF1 RB0 B0 W0 F2 SF2 RB1 B1 RB2 W1 B2 W2"));
}

TEST_CASE("ZB-H1 keeps 1F1B's forwards, backwards and transfers in 1F1B's order, with one W after each B") {
  for (int pp : {1, 2, 3, 4, 6})
    for (int m = 1; m <= 12; ++m)
      for (int rank = 0; rank < pp; ++rank) {
        INFO("pp=" << pp << " m=" << m << " rank=" << rank);
        const auto got = collect(zero_bubble_h1(zb(pp, rank, m)));
        schedule_shape plain = zb(pp, rank, m);
        plain.kind = schedule_kind::one_f_one_b;
        REQUIRE(text(without_weight_passes(got)) == text(collect(one_f_one_b(plain))));
        std::vector<int> weights;
        int backwards = 0, forwards = 0, peak = 0;
        for (const action& a : got) {
          if (a.kind == op::forward) ++forwards;
          if (a.kind == op::backward) ++backwards;
          if (a.kind == op::backward_weight) {
            REQUIRE(a.microbatch < backwards);  // after its own backward
            weights.push_back(a.microbatch);
          }
          peak = std::max(peak, forwards - static_cast<int>(weights.size()));
        }
        REQUIRE(weights.size() == std::size_t(m));
        for (int k = 0; k < m; ++k) REQUIRE(weights[std::size_t(k)] == k);
        CHECK(peak <= pp);  // micro-batches whose weight pass has not run: 1F1B's first-rank bound
      }
}

TEST_CASE("ZB-H1 forward-only is 1F1B forward-only") {
  schedule_shape s = zb(3, 1, 4);
  s.forward_only = true;
  schedule_shape plain = s;
  plain.kind = schedule_kind::one_f_one_b;
  CHECK(text(collect(zero_bubble_h1(s))) == text(collect(one_f_one_b(plain))));
}

TEST_CASE("ZB-H1's replayed bubble is (pp-1)(t_f+t_b-t_w) per rank, about a third of 1F1B's") {
  int checked = 0;
  for (int pp : {2, 3, 4, 6, 8})
    for (int m = pp; m <= 3 * pp + 1; ++m)
      for (auto [t_f, t_b, t_w] : {std::tuple{1.0, 1.0, 1.0}, {1.0, 2.0, 1.0}, {2.0, 2.0, 1.0}, {1.0, 1.5, 0.5}}) {
        INFO("pp=" << pp << " m=" << m << " t_f=" << t_f << " t_b=" << t_b << " t_w=" << t_w);
        schedule_shape s = zb(pp, 0, m);
        const replay r = replay_compute(s, t_f, t_b, t_w);
        REQUIRE_FALSE(r.deadlocked);
        for (int rank = 0; rank < pp; ++rank)
          REQUIRE(r.bubble(rank) == Approx(zero_bubble_h1_bubble_fraction(pp, m, t_f, t_b, t_w)).margin(1e-12));
        // 1F1B on the same split runs each weight pass right after its backward.
        s.kind = schedule_kind::one_f_one_b;
        const replay one_f_one_b_replay = replay_compute(s, t_f, t_b + t_w);
        CHECK(r.makespan < one_f_one_b_replay.makespan);
        ++checked;
      }
  CHECK(checked > 100);
  schedule_shape s = zb(4, 0, 8);
  CHECK(ideal_bubble_fraction(s) == Approx(3.0 / 27));
  s.kind = schedule_kind::one_f_one_b;
  CHECK(ideal_bubble_fraction(s) == Approx(3.0 / 11));
}
