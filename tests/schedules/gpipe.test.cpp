// Tests for schedules/gpipe.hpp: all forwards, then all backwards.
#include "schedules/gpipe.hpp"

#include <catch2/catch.hpp>

#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

TEST_CASE("gpipe runs every forward before the first backward on every rank") {
  schedule_shape s{.pipeline_model_parallel_size = 3, .pipeline_rank = 0, .num_microbatches = 3,
                   .kind = schedule_kind::gpipe};
  CHECK(text(collect(gpipe(s))) == actions("F0 SF0 F1 SF1 F2 SF2 RB0 B0 RB1 B1 RB2 B2"));
  s.pipeline_rank = 1;
  CHECK(text(collect(gpipe(s))) ==
        actions("RF0 F0 SF0 RF1 F1 SF1 RF2 F2 SF2 RB0 B0 SB0 RB1 B1 SB1 RB2 B2 SB2"));
  s.pipeline_rank = 2;
  CHECK(text(collect(gpipe(s))) == actions("RF0 F0 RF1 F1 RF2 F2 B0 SB0 B1 SB1 B2 SB2"));
  CHECK(warmup_microbatches(s) == 3);
}
