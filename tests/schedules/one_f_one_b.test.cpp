// Tests for schedules/one_f_one_b.hpp against hand-derived 1F1B orders (PipeDream-Flush).
#include "schedules/one_f_one_b.hpp"

#include <catch2/catch.hpp>

#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

namespace {
schedule_shape shape(int pp, int rank, int m) {
  return {.pipeline_model_parallel_size = pp, .pipeline_rank = rank, .num_microbatches = m};
}
}  // namespace

TEST_CASE("last stage alternates forward and backward with no warmup") {
  auto got = collect(one_f_one_b(shape(4, 3, 4)));
  CHECK(text(compute_only(got)) == actions("F0 B0 F1 B1 F2 B2 F3 B3"));
  CHECK(text(got) == actions("RF0 F0 B0 SB0 RF1 F1 B1 SB1 RF2 F2 B2 SB2 RF3 F3 B3 SB3"));
}

TEST_CASE("first of four stages runs three warmup forwards then alternates") {
  auto got = collect(one_f_one_b(shape(4, 0, 6)));
  CHECK(text(compute_only(got)) == actions("F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5"));
  CHECK(text(got) == actions("F0 SF0 F1 SF1 F2 SF2 F3 SF3 RB0 B0 F4 SF4 RB1 B1 F5 SF5 RB2 B2 "
                             "RB3 B3 RB4 B4 RB5 B5"));
  CHECK(warmup_microbatches(shape(4, 0, 6)) == 3);
}

TEST_CASE("a middle stage exchanges with both neighbours in the steady state") {
  auto got = collect(one_f_one_b(shape(3, 1, 3)));
  CHECK(text(got) == actions("RF0 F0 SF0 RF1 F1 SF1 RB0 B0 SB0 RF2 F2 SF2 RB1 B1 SB1 "
                             "RB2 B2 SB2"));
}

TEST_CASE("with fewer microbatches than stages the warmup takes all of them") {
  auto got = collect(one_f_one_b(shape(4, 0, 2)));
  CHECK(text(got) == actions("F0 SF0 F1 SF1 RB0 B0 RB1 B1"));
  CHECK(warmup_microbatches(shape(4, 0, 2)) == 2);
  CHECK(warmup_microbatches(shape(4, 2, 2)) == 1);
}

TEST_CASE("1F1B forward-only streams forwards through the pipeline") {
  schedule_shape s = shape(2, 1, 3);
  s.forward_only = true;
  CHECK(text(collect(one_f_one_b(s))) == actions("RF0 F0 RF1 F1 RF2 F2"));
  s.pipeline_rank = 0;
  CHECK(text(collect(one_f_one_b(s))) == actions("F0 SF0 F1 SF1 F2 SF2"));
}
