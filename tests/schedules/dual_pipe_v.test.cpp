// Tests for schedules/dual_pipe_v.hpp: a hand-derived order, every pass once and in dependency
// order, transfers that pair up link by link, and the bubble of a virtual-time replay of every rank.
#include "schedules/dual_pipe_v.hpp"

#include <catch2/catch.hpp>
#include <map>

#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

namespace {
schedule_shape dpv(int pp, int rank, int m) {
  return {.pipeline_model_parallel_size = pp, .pipeline_rank = rank, .virtual_pipeline_model_parallel_size = 2,
          .num_microbatches = m, .kind = schedule_kind::dual_pipe_v};
}
}  // namespace

TEST_CASE("DualPipeV on two ranks: DeepSeek's eight steps, full backwards paired with forwards in the middle") {
  // Rank 0 of 2, m = 4: step 1 F0 F0; step 2 (F0 F1); step 3 (B1 zb, W, F1); step 4 once
  // (F0 B1 F1 B0); step 5 (B1, F1 B0); step 6 one pair (B1 B0), deferring from its B0 on (even
  // rank, middle pair i = 0); step 7 (W, B0 zb); step 8 the W left.
  CHECK(text(compute_only(collect(dual_pipe_v(dpv(2, 0, 4))))) ==
        actions("F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 F3.0 B1.1 W1.1 F2.1 B0.0 W0.0 "
                "B2.1 W2.1 F3.1 B1.0 W1.0 B3.1 W3.1 B2.0 W2.0 B3.0 W3.0"));
  // Rank 1 of 2: no step 1, 3, 5 or 7; step 2 twice, step 4 twice, step 6 two pairs (odd rank:
  // deferring from the B1 of pair 1 on), step 8 two W.
  CHECK(text(compute_only(collect(dual_pipe_v(dpv(2, 1, 4))))) ==
        actions("F0.0 F0.1 F1.0 F1.1 F2.0 B0.1 W0.1 F2.1 B0.0 W0.0 F3.0 B1.1 W1.1 F3.1 B1.0 W1.0 "
                "B2.1 W2.1 B2.0 W2.0 B3.1 B3.0 W3.1 W3.0"));
}

TEST_CASE("DualPipeV runs every pass once after what it needs, its transfers pair up and no rank deadlocks") {
  for (int pp : {2, 3, 4, 5, 8})
    for (int m = 2 * pp; m <= 4 * pp + 1; ++m) {
      INFO("pp=" << pp << " m=" << m);
      for (int rank = 0; rank < pp; ++rank) {
        std::map<std::tuple<op, int, int>, int> seen;
        for (const action& a : compute_only(collect(dual_pipe_v(dpv(pp, rank, m))))) {
          REQUIRE(seen[{a.kind, a.microbatch, a.chunk}]++ == 0);
          if (a.kind == op::backward) REQUIRE(seen.count({op::forward, a.microbatch, a.chunk}));
          if (a.kind == op::backward_weight) REQUIRE(seen.count({op::backward, a.microbatch, a.chunk}));
        }
        REQUIRE(seen.size() == std::size_t(6 * m));
      }
      check_v_transfers(dpv(pp, 0, m));
      const replay equal = replay_compute(dpv(pp, 0, m), 1.0, 1.0, 1.0);
      REQUIRE_FALSE(equal.deadlocked);
      for (int rank = 0; rank < pp; ++rank)
        REQUIRE(equal.bubble(rank) == Approx(dual_pipe_v_bubble_fraction(pp, m)).margin(1e-12));
      // ZB-V's bubble: the start-up alone.
      CHECK(dual_pipe_v_bubble_fraction(pp, m) == Approx(zero_bubble_v_bubble_fraction(pp, m)));
    }
}

TEST_CASE("DualPipeV's forward-only order and its warm-up") {
  schedule_shape s = dpv(3, 1, 6);
  s.forward_only = true;
  const replay r = replay_compute(s, 1.0, 1.0, 1.0);
  REQUIRE_FALSE(r.deadlocked);
  CHECK(r.bubble(0) == Approx(ideal_bubble_fraction(s)));
  CHECK(warmup_microbatches(dpv(4, 0, 8)) == 8);
  CHECK(warmup_microbatches(dpv(4, 3, 8)) == 9);  // the last rank's first steady F0 comes before its B1
  CHECK(schedule_kind_named("dualpipev") == schedule_kind::dual_pipe_v);
  CHECK_FALSE(validate(dpv(1, 0, 4)).empty());
  REQUIRE(validate(dpv(4, 0, 7)).size() == 1);
  CHECK(validate(dpv(4, 0, 7))[0].find("at least 2 x --pipeline-model-parallel-size = 8 micro-batches") != std::string::npos);
  schedule_shape evaluation = dpv(4, 0, 3);
  evaluation.forward_only = true;
  CHECK(validate(evaluation).empty());
  const replay few = replay_compute(evaluation, 1.0, 1.0, 1.0);
  CHECK_FALSE(few.deadlocked);
}
