// Tests for schedules/schedule_shape.hpp: Megatron's schedule choice and checks, warmup, and the
// ideal bubble against a virtual-time replay of every rank.
#include "schedules/schedule_shape.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;
using Catch::Contains;

namespace {
schedule_shape interleaved(int pp, int vp, int m, int g = 0) {
  return {.pipeline_model_parallel_size = pp, .virtual_pipeline_model_parallel_size = vp,
          .num_microbatches = m, .microbatch_group_size_per_vp_stage = g};
}
}  // namespace

TEST_CASE("the schedule is picked the way get_forward_backward_func picks it") {
  CHECK(resolved_kind({.pipeline_model_parallel_size = 1}) == schedule_kind::no_pipelining);
  CHECK(resolved_kind({.pipeline_model_parallel_size = 2}) == schedule_kind::one_f_one_b);
  CHECK(resolved_kind(interleaved(2, 2, 4)) == schedule_kind::interleaved_one_f_one_b);
  CHECK(resolved_kind({.pipeline_model_parallel_size = 2, .kind = schedule_kind::gpipe}) ==
        schedule_kind::gpipe);
}

TEST_CASE("the microbatch group size defaults to the pipeline size") {
  CHECK(microbatch_group_size(interleaved(4, 2, 8)) == 4);
  CHECK(microbatch_group_size(interleaved(4, 2, 8, 6)) == 6);
}

TEST_CASE("a group size outside [pp, m] is rejected naming both bounds") {
  auto errors = validate(interleaved(4, 2, 8, 9));
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Contains("--microbatch-group-size-per-virtual-pipeline-stage=9") &&
                            Contains("[--pipeline-model-parallel-size=4, number of microbatches=8]"));
  CHECK(validate(interleaved(4, 2, 8, 3)).size() == 1);
  // m < pp: no group size can work, so the fix is more microbatches.
  auto few = validate(interleaved(4, 2, 3));
  REQUIRE(few.size() == 1);
  CHECK_THAT(few[0], Contains("at least 4"));
}

TEST_CASE("a last group smaller than pp is rejected with group sizes that would work") {
  auto errors = validate(interleaved(4, 2, 10, 4));
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Contains("10 % --microbatch-group-size-per-virtual-pipeline-stage=4 = 2"));
  CHECK_THAT(errors[0], Contains("try a group size of 5, 6, 10"));
  // Uneven groups are fine when the remainder still fills the pipeline.
  CHECK(validate(interleaved(4, 2, 11, 7)).empty());
  CHECK(validate(interleaved(4, 2, 12, 4)).empty());
}

TEST_CASE("interleaving needs more than one stage, and more than two without p2p overlap") {
  CHECK_THAT(validate(interleaved(1, 2, 4)).at(0), Contains("greater than 1"));
  auto no_overlap = interleaved(2, 2, 4);
  no_overlap.overlap_p2p_comm = false;
  CHECK_THAT(validate(no_overlap).at(0), Contains("greater than 2"));
  no_overlap.pipeline_model_parallel_size = 3;
  no_overlap.num_microbatches = 3;
  CHECK(validate(no_overlap).empty());
}

TEST_CASE("every broken rule is reported in one pass") {
  schedule_shape s = interleaved(2, 2, 4);
  s.overlap_p2p_comm = false;
  s.kind = schedule_kind::gpipe;
  CHECK(validate(s).size() == 2);
  CHECK(validate({.pipeline_model_parallel_size = 2, .pipeline_rank = 2}).size() == 1);
  CHECK(validate({.num_microbatches = 0}).size() == 1);
}

TEST_CASE("1F1B warmup is min(pp - rank - 1, m), no pipelining has none") {
  for (int r = 0; r < 4; ++r)
    CHECK(warmup_microbatches({.pipeline_model_parallel_size = 4, .pipeline_rank = r,
                               .num_microbatches = 8}) == 3 - r);
  CHECK(warmup_microbatches({.pipeline_model_parallel_size = 8, .num_microbatches = 2}) == 2);
  CHECK(warmup_microbatches({.num_microbatches = 5}) == 0);
}

TEST_CASE("1F1B bubble is (pp-1)/(m+pp-1) and interleaving divides the bubble by vp") {
  CHECK(ideal_bubble_fraction({.pipeline_model_parallel_size = 4, .num_microbatches = 8}) ==
        Approx(3.0 / 11));
  CHECK(ideal_bubble_fraction(interleaved(4, 2, 8)) == Approx(3.0 / 19));
  CHECK(ideal_bubble_fraction({.num_microbatches = 8}) == 0.0);
}

TEST_CASE("the ideal bubble equals the idle time of a virtual-time replay of all ranks") {
  // Every valid shape in a grid, forward 1 and backward 1 or 2 time units per chunk, including
  // uneven microbatch groups, g > pp, m < pp, GPipe and forward-only.
  int shapes = 0;
  for (int pp : {2, 3, 4})
    for (int vp : {1, 2, 3})
      for (int m = 1; m <= 13; ++m)
        for (int g = pp; g <= std::max(m, pp); ++g)
          for (auto kind : {schedule_kind::megatron, schedule_kind::gpipe})
            for (bool forward_only : {false, true}) {
              schedule_shape s = interleaved(pp, vp, m, g);
              s.kind = kind;
              s.forward_only = forward_only;
              if (!validate(s).empty()) continue;
              for (double t_backward : {1.0, 2.0}) {
                const replay r = replay_compute(s, 1.0, t_backward);
                INFO("pp=" << pp << " vp=" << vp << " m=" << m << " g=" << g << " kind="
                           << to_string(kind) << " forward_only=" << forward_only);
                REQUIRE_FALSE(r.deadlocked);
                for (int rank = 0; rank < pp; ++rank)
                  REQUIRE(r.bubble(rank) == Approx(ideal_bubble_fraction(s)).margin(1e-12));
              }
              ++shapes;
            }
  CHECK(shapes > 300);
}
