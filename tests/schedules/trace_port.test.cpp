// Tests for schedules/trace_port.hpp: the port `mactor schedule` prints from.
#include "schedules/trace_port.hpp"

#include <catch2/catch.hpp>

#include "schedules/one_f_one_b.hpp"
#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

TEST_CASE("the trace port records each action as the schedule hands it over") {
  trace_port port;
  run_schedule(one_f_one_b({.pipeline_model_parallel_size = 2, .pipeline_rank = 1,
                            .num_microbatches = 2}),
               port);
  CHECK(port.text(true) == actions("RF0 F0 B0 SB0 RF1 F1 B1 SB1"));
  CHECK(port.text(false) == actions("F0 B0 F1 B1"));
  CHECK(port.compute_actions().size() == 4);
}

TEST_CASE("tracing all ranks gives one list per pipeline rank, rank 0 first") {
  auto ranks = trace_all_ranks({.pipeline_model_parallel_size = 3, .pipeline_rank = 2,
                                .num_microbatches = 1});
  REQUIRE(ranks.size() == 3);
  CHECK(text(ranks[0]) == actions("F0 SF0 RB0 B0"));
  CHECK(text(ranks[1]) == actions("RF0 F0 SF0 RB0 B0 SB0"));
  CHECK(text(ranks[2]) == actions("RF0 F0 B0 SB0"));
}
