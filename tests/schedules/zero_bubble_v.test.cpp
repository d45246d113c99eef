// Tests for schedules/zero_bubble_v.hpp: hand-derived orders, every pass once and in dependency
// order, transfers that pair up across ranks link by link, the activation bound, and the bubble of
// a virtual-time replay of every rank against the closed forms.
#include "schedules/zero_bubble_v.hpp"

#include <catch2/catch.hpp>
#include <map>

#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

namespace {
schedule_shape zbv(int pp, int rank, int m) {
  return {.pipeline_model_parallel_size = pp, .pipeline_rank = rank, .virtual_pipeline_model_parallel_size = 2,
          .num_microbatches = m, .kind = schedule_kind::zero_bubble_v};
}
}  // namespace

TEST_CASE("ZB-V on two ranks: rank 0 runs the embedding and the loss, rank 1 turns the V") {
  CHECK(text(compute_only(collect(zero_bubble_v(zbv(2, 0, 4))))) ==
        actions("F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F3.0 B0.0 W0.0 F2.1 B2.1 W2.1 "
                "B1.0 W1.0 F3.1 B3.1 W3.1 B2.0 W2.0 B3.0 W3.0"));
  CHECK(text(compute_only(collect(zero_bubble_v(zbv(2, 1, 4))))) ==
        actions("F0.0 F0.1 F1.0 F1.1 B0.1 W0.1 F2.0 B0.0 W0.0 F2.1 B1.1 W1.1 F3.0 B1.0 W1.0 "
                "F3.1 B2.1 W2.1 B2.0 B3.1 B3.0 W2.0 W3.1 W3.0"));
  CHECK(virtual_stage(zbv(4, 1, 8), 0) == 1);
  CHECK(virtual_stage(zbv(4, 1, 8), 1) == 6);
}

TEST_CASE("ZB-V runs every forward, input-gradient and weight pass once, each after what it needs, "
          "within 1F1B's activation memory") {
  for (int pp : {2, 3, 4, 5, 8})
    for (int m = 1; m <= 4 * pp; ++m)
      for (int rank = 0; rank < pp; ++rank) {
        INFO("pp=" << pp << " m=" << m << " rank=" << rank);
        std::map<std::tuple<op, int, int>, int> seen;
        int in_flight = 0, peak = 0;
        for (const action& a : compute_only(collect(zero_bubble_v(zbv(pp, rank, m))))) {
          REQUIRE(seen[{a.kind, a.microbatch, a.chunk}]++ == 0);
          if (a.kind == op::backward) REQUIRE(seen.count({op::forward, a.microbatch, a.chunk}));
          if (a.kind == op::backward_weight) REQUIRE(seen.count({op::backward, a.microbatch, a.chunk}));
          in_flight += a.kind == op::forward ? 1 : a.kind == op::backward_weight ? -1 : 0;
          peak = std::max(peak, in_flight);
        }
        REQUIRE(seen.size() == std::size_t(6 * m));
        // A chunk holds half a 1F1B stage's layers: 2 pp chunk micro-batches are 1F1B's pp.
        CHECK(peak <= 2 * pp);
      }
}

TEST_CASE("ZB-V's transfers pair up: each receive before its compute, each send after, the same "
          "micro-batch order at both ends of every link") {
  for (int pp : {2, 3, 4})
    for (int m : {1, 2, 5, 8, 13}) {
      INFO("pp=" << pp << " m=" << m);
      check_v_transfers(zbv(pp, 0, m));
    }
}

TEST_CASE("ZB-V's replayed bubble is the start-up alone from 2 pp - 1 micro-batches on, half of ZB-H1's") {
  for (int pp : {2, 3, 4, 6, 8})
    for (int m = 1; m <= 4 * pp; ++m) {
      INFO("pp=" << pp << " m=" << m);
      const replay equal = replay_compute(zbv(pp, 0, m), 1.0, 1.0, 1.0);
      REQUIRE_FALSE(equal.deadlocked);
      for (int rank = 0; rank < pp; ++rank)
        REQUIRE(equal.bubble(rank) == Approx(zero_bubble_v_bubble_fraction(pp, m)).margin(1e-12));
      if (m < 2 * pp - 1) continue;
      // Weight passes as long as forwards, input-gradient passes up to twice as long: (pp - 1) t_b idle.
      for (auto [t_f, t_b] : {std::pair{1.0, 2.0}, {1.0, 1.5}, {2.0, 3.0}}) {
        const replay r = replay_compute(zbv(pp, 0, m), t_f, t_b, t_f);
        for (int rank = 0; rank < pp; ++rank) REQUIRE(r.makespan - r.busy[rank] == Approx((pp - 1) * t_b));
      }
      // ZB-H1 with one chunk per rank whose passes take twice as long idles twice as much.
      schedule_shape h1{.pipeline_model_parallel_size = pp, .num_microbatches = m, .kind = schedule_kind::zero_bubble_h1};
      const replay whole = replay_compute(h1, 2.0, 2.0, 2.0);
      CHECK(whole.makespan - whole.busy[0] == Approx(2 * (equal.makespan - equal.busy[0])));
    }
}

TEST_CASE("ZB-V forward-only runs the forwards in the training order, with 1F1B's forward-only bubble") {
  for (int pp : {2, 3, 4})
    for (int m : {1, 3, 8}) {
      INFO("pp=" << pp << " m=" << m);
      schedule_shape s = zbv(pp, 0, m);
      s.forward_only = true;
      const replay r = replay_compute(s, 1.0, 1.0, 1.0);
      REQUIRE_FALSE(r.deadlocked);
      CHECK(r.bubble(0) == Approx(ideal_bubble_fraction(s)));
      CHECK(ideal_bubble_fraction(s) == Approx(double(pp - 1) / (m + pp - 1)));
    }
}

TEST_CASE("ZB-V needs two chunks per rank on two or more ranks") {
  schedule_shape one_chunk = zbv(4, 0, 8);
  one_chunk.virtual_pipeline_model_parallel_size = 1;
  REQUIRE(validate(one_chunk).size() == 1);
  CHECK(validate(one_chunk)[0].find("--num-virtual-stages-per-pipeline-rank 2") != std::string::npos);
  CHECK_FALSE(validate(zbv(1, 0, 8)).empty());
  CHECK(validate(zbv(2, 1, 1)).empty());
  CHECK(schedule_kind_named("zbv") == schedule_kind::zero_bubble_v);
  CHECK(warmup_microbatches(zbv(4, 0, 16)) == 8);
  CHECK(warmup_microbatches(zbv(4, 3, 16)) == 8);
  CHECK(warmup_microbatches(zbv(4, 0, 2)) == 3);
}
