// Tests for schedules/no_pipelining.hpp: gradient accumulation on one stage.
#include "schedules/no_pipelining.hpp"

#include <catch2/catch.hpp>

#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

TEST_CASE("without pipelining each backward follows its own forward") {
  schedule_shape s{.num_microbatches = 4};
  CHECK(text(collect(no_pipelining(s))) == actions("F0 B0 F1 B1 F2 B2 F3 B3"));
}

TEST_CASE("without pipelining forward-only runs forwards and never transfers") {
  schedule_shape s{.num_microbatches = 3, .forward_only = true};
  CHECK(text(collect(no_pipelining(s))) == actions("F0 F1 F2"));
}
