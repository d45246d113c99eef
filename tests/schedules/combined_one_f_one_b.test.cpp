// Tests for Megatron's combined 1F1B order (schedule_shape::combined_1f1b, from
// --overlap-moe-expert-parallel-comm): no pipelining pairs each forward with the previous
// micro-batch's backward; interleaving adds one warmup forward so no pair depends on itself.
// megatron_schedule_check.py compares the full orders, transfers included, with Megatron's code.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <tuple>

#include "schedules/interleaved_one_f_one_b.hpp"
#include "schedules/no_pipelining.hpp"
#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

namespace {

schedule_shape combined(int pp, int rank, int vp, int m) {
  return {.pipeline_model_parallel_size = pp, .pipeline_rank = rank, .virtual_pipeline_model_parallel_size = vp,
          .num_microbatches = m, .combined_1f1b = true};
}

// The pairs (a forward directly followed by a backward) whose backward needs the forward: the
// same micro-batch on a virtual stage at or after the backward's (its output reaches the loss
// only through that forward).
int self_dependent_pairs(const schedule_shape& s) {
  int found = 0;
  const auto ops = compute_only(collect(make_schedule(s)));
  for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
    const action& f = ops[i];
    const action& b = ops[i + 1];
    if (f.kind == op::forward && b.kind == op::backward && f.microbatch == b.microbatch &&
        virtual_stage(s, f.chunk) >= virtual_stage(s, b.chunk))
      ++found;
  }
  return found;
}

}  // namespace

TEST_CASE("combined 1F1B without pipelining pairs each forward with the previous backward") {
  CHECK(text(collect(no_pipelining(combined(1, 0, 1, 4)))) == actions("F0 F1 B0 F2 B1 F3 B2 B3"));
  CHECK(text(collect(no_pipelining(combined(1, 0, 1, 1)))) == actions("F0 B0"));
  CHECK(warmup_microbatches(combined(1, 0, 1, 4)) == 1);
  CHECK(warmup_microbatches(combined(1, 0, 1, 1)) == 0);
  // Evaluation has no backward to pair: the plain order (Megatron checks `not forward_only`).
  auto evaluation = combined(1, 0, 1, 3);
  evaluation.forward_only = true;
  CHECK(text(collect(no_pipelining(evaluation))) == actions("F0 F1 F2"));
}

TEST_CASE("combined interleaved 1F1B runs one more warmup forward on every rank") {
  for (int r = 0; r < 4; ++r) {
    auto plain = combined(4, r, 2, 8);
    plain.combined_1f1b = false;
    CHECK(warmup_microbatches(combined(4, r, 2, 8)) == warmup_microbatches(plain) + 1);
  }
  CHECK(warmup_microbatches(combined(4, 0, 2, 4)) == 8);  // still capped at every forward
  // pp=2, vp=2, m=2, rank 1: four forwards before the first backward, then the backwards; with
  // overlap each pair is followed by its forward exchange, then its backward exchange.
  CHECK(text(collect(interleaved_one_f_one_b(combined(2, 1, 2, 2)))) ==
        actions("RF0.0 F0.0 RF1.0 SF0.0 F1.0 RF0.1 SF1.0 F0.1 RF1.1 F1.1 B0.1 SB0.1 "
                "B1.1 SB1.1 RB0.0 B0.0 SB0.0 RB1.0 B1.0 SB1.0"));
  // pp=2, vp=2, m=4, rank 0: the steady pairs post RF SF after the pair, then SB RB.
  const auto rank0 = collect(interleaved_one_f_one_b(combined(2, 0, 2, 4)));
  CHECK(text(compute_only(rank0)) ==
        actions("F0.0 F1.0 F0.1 F1.1 F2.0 F3.0 B0.1 F2.1 B1.1 F3.1 B0.0 B1.0 B2.1 B3.1 B2.0 B3.0"));
}

TEST_CASE("no combined pair's backward needs its own forward, unlike plain interleaving's") {
  int shapes = 0;
  for (int pp : {2, 3, 4})
    for (int vp : {2, 3})
      for (int m = pp; m <= 4 * pp + 1; ++m) {
        auto s = combined(pp, 0, vp, m);
        if (!validate(s).empty()) continue;
        for (int r = 0; r < pp; ++r) {
          s.pipeline_rank = r;
          INFO("pp=" << pp << " vp=" << vp << " m=" << m << " rank=" << r);
          CHECK(self_dependent_pairs(s) == 0);
        }
        ++shapes;
      }
  CHECK(shapes > 20);
  // The plain order has such steps: the last rank's F0.1 B0.1 and F1.1 B1.1 at pp 2, vp 2, m 2.
  auto plain = combined(2, 1, 2, 2);
  plain.combined_1f1b = false;
  CHECK(self_dependent_pairs(plain) == 2);
}

TEST_CASE("the combined order runs every forward and backward once, in a consistent order") {
  for (int pp : {1, 2, 3, 4})
    for (int vp : {1, 2, 3})
      for (int m = 1; m <= 12; ++m) {
        auto s = combined(pp, 0, vp, m);
        if (!validate(s).empty()) continue;
        INFO("pp=" << pp << " vp=" << vp << " m=" << m);
        auto plain = s;
        plain.combined_1f1b = false;
        for (int r = 0; r < pp; ++r) {
          s.pipeline_rank = plain.pipeline_rank = r;
          auto a = compute_only(collect(make_schedule(s))), b = compute_only(collect(make_schedule(plain)));
          const auto less = [](const action& x, const action& y) {
            return std::tie(x.kind, x.microbatch, x.chunk) < std::tie(y.kind, y.microbatch, y.chunk);
          };
          std::sort(a.begin(), a.end(), less), std::sort(b.begin(), b.end(), less);
          CHECK(a == b);
        }
        CHECK_FALSE(replay_compute(s, 1.0, 2.0).deadlocked);
      }
}

TEST_CASE("a combined order exists only without pipelining or interleaved") {
  auto s = combined(2, 0, 1, 4);
  const auto errors = validate(s);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::Contains("--overlap-moe-expert-parallel-comm") && Catch::Contains("1f1b"));
  s.virtual_pipeline_model_parallel_size = 2;
  CHECK(validate(s).empty());
  s.kind = schedule_kind::zero_bubble_v;
  CHECK_THAT(validate(s).back(), Catch::Contains("zbv"));
}

TEST_CASE("run one after the other, a combined pair leaves interleaving's ideal bubble") {
  // The extra warmup forward only moves a forward earlier: in the virtual-time replay (pairs not
  // overlapped) every rank idles (pp - 1) / (vp m + pp - 1) of the iteration, as plain interleaving.
  int shapes = 0;
  for (int pp : {2, 3, 4})
    for (int vp : {2, 3})
      for (int m = pp; m <= 3 * pp; ++m) {
        auto s = combined(pp, 0, vp, m);
        if (!validate(s).empty()) continue;
        for (double t_backward : {1.0, 2.0}) {
          const replay r = replay_compute(s, 1.0, t_backward);
          INFO("pp=" << pp << " vp=" << vp << " m=" << m << " t_backward=" << t_backward);
          REQUIRE_FALSE(r.deadlocked);
          for (int rank = 0; rank < pp; ++rank)
            CHECK(r.bubble(rank) == Approx(double(pp - 1) / (vp * m + pp - 1)).margin(1e-12));
        }
        ++shapes;
      }
  CHECK(shapes == 18);
}
