// Tests for schedules/interleaved_one_f_one_b.hpp against the examples written in Megatron-Core's
// own docstrings and against hand-derived orders.
#include "schedules/interleaved_one_f_one_b.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

namespace {
schedule_shape shape(int pp, int rank, int vp, int m, int g = 0) {
  return {.pipeline_model_parallel_size = pp, .pipeline_rank = rank,
          .virtual_pipeline_model_parallel_size = vp, .num_microbatches = m,
          .microbatch_group_size_per_vp_stage = g};
}

// Forward microbatch ids in order, e.g. "0 1 0 1 2 3 2 3".
std::string forward_microbatches(const std::vector<action>& ops) {
  std::string out;
  for (const action& a : ops)
    if (a.kind == op::forward) out += (out.empty() ? "" : " ") + std::to_string(a.microbatch);
  return out;
}
}  // namespace

TEST_CASE("groups of g microbatches run on one chunk before the next chunk") {
  // ModelParallelConfig.microbatch_group_size_per_vp_stage docstring, PP=2 VP=2:
  // g=2, m=4: "rank 0 | 0 1 0 1 2 3 2 3"; g=3, m=5: "rank 0 | 0 1 2 0 1 2 3 4 3 4".
  CHECK(forward_microbatches(collect(interleaved_one_f_one_b(shape(2, 0, 2, 4, 2)))) ==
        "0 1 0 1 2 3 2 3");
  CHECK(forward_microbatches(collect(interleaved_one_f_one_b(shape(2, 1, 2, 4, 2)))) ==
        "0 1 0 1 2 3 2 3");
  CHECK(forward_microbatches(collect(interleaved_one_f_one_b(shape(2, 0, 2, 5, 3)))) ==
        "0 1 2 0 1 2 3 4 3 4");
}

TEST_CASE("first rank of PP2 VP2 M5 N3 runs Megatron's documented chunk order") {
  // convert_schedule_table_to_order docstring: with 5 warmup microbatches the order is
  // 1 1 1 2 2 2 -2 1 -2 1 -2 2 -1 2 -1 -1 -2 -2 -1 -1, where forward on chunk c is c + 1 and the
  // backward of table chunk c (which runs on chunk vp - 1 - c) is c - vp.
  const schedule_shape s = shape(2, 0, 2, 5, 3);
  REQUIRE(warmup_microbatches(s) == 5);
  std::string order;
  for (const action& a : compute_only(collect(interleaved_one_f_one_b(s)))) {
    const int code = a.kind == op::forward ? a.chunk + 1 : (2 - 1 - a.chunk) - 2;
    order += (order.empty() ? "" : " ") + std::to_string(code);
  }
  CHECK(order == "1 1 1 2 2 2 -2 1 -2 1 -2 2 -1 2 -1 -1 -2 -2 -1 -1");
}

TEST_CASE("backward k runs the microbatch of forward k on the mirrored chunk") {
  // pp=2, vp=2, m=2: the order is (0,0) (1,0) (0,1) (1,1). Rank 1 warms up with (vp-1)*g = 2
  // forwards; rank 0 adds 2 more and so runs every forward first.
  CHECK(text(compute_only(collect(interleaved_one_f_one_b(shape(2, 1, 2, 2))))) ==
        actions("F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0"));
  CHECK(text(compute_only(collect(interleaved_one_f_one_b(shape(2, 0, 2, 2))))) ==
        actions("F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0"));
}

TEST_CASE("interleaved transfers wrap from the last rank to the first rank's next chunk") {
  // pp=2, vp=2, m=2, rank 1 (last): chunk 0 sends to rank 0's chunk 1; chunk 1 keeps its output.
  // Overlapped p2p: every compute is followed by its own exchange (RF before SF, SB before RB).
  CHECK(text(collect(interleaved_one_f_one_b(shape(2, 1, 2, 2)))) ==
        actions("RF0.0 F0.0 RF1.0 SF0.0 F1.0 RF0.1 SF1.0 F0.1 RF1.1 B0.1 SB0.1 "
                "F1.1 B1.1 SB1.1 RB0.0 B0.0 SB0.0 RB1.0 B1.0 SB1.0"));
}

TEST_CASE("without p2p overlap the steady state batches one exchange per step") {
  // pp=3, vp=2, m=3, rank 2: warmup (vp-1)*g = 3, then three steps of F, B, SB RF SF RB.
  const auto got = collect(interleaved_one_f_one_b(
      [] { auto s = shape(3, 2, 2, 3); s.overlap_p2p_comm = false; return s; }()));
  CHECK(text(compute_only(got)) == actions("F0.0 F1.0 F2.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 "
                                           "B0.0 B1.0 B2.0"));
  CHECK(text(got) == actions("RF0.0 F0.0 RF1.0 SF0.0 F1.0 RF2.0 SF1.0 F2.0 RF0.1 SF2.0 "
                             "F0.1 B0.1 SB0.1 RF1.1 F1.1 B1.1 SB1.1 RF2.1 F2.1 B2.1 SB2.1 "
                             "RB0.0 B0.0 SB0.0 RB1.0 B1.0 SB1.0 RB2.0 B2.0 SB2.0"));
}

TEST_CASE("interleaved warmup is two forwards per later rank plus vp-1 groups") {
  for (int r = 0; r < 4; ++r)
    CHECK(warmup_microbatches(shape(4, r, 2, 8)) == 2 * (4 - r - 1) + 4);
  CHECK(warmup_microbatches(shape(4, 0, 3, 8, 6)) == 6 + 2 * 6);
  // Capped at every forward of the iteration.
  CHECK(warmup_microbatches(shape(4, 0, 2, 4)) == 8);
}
