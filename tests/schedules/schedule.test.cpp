// Tests for schedules/schedule.hpp: dispatch, and that the ranks' transfers fit together.
#include "schedules/schedule.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "tests/schedules/schedule_test_util.hpp"

using namespace schedule_test;

TEST_CASE("make_schedule runs the schedule Megatron would pick") {
  CHECK(text(compute_only(collect(make_schedule({.num_microbatches = 2})))) == actions("F0 B0 F1 B1"));
  CHECK(text(compute_only(collect(make_schedule(
            {.pipeline_model_parallel_size = 2, .num_microbatches = 3})))) ==
        actions("F0 F1 B0 F2 B1 B2"));
  CHECK(text(compute_only(collect(make_schedule({.pipeline_model_parallel_size = 2,
                                                 .num_microbatches = 2,
                                                 .kind = schedule_kind::gpipe})))) ==
        actions("F0 F1 B0 B1"));
}

TEST_CASE("make_schedule refuses a shape that breaks a rule, with every message") {
  schedule_shape s{.pipeline_model_parallel_size = 4, .virtual_pipeline_model_parallel_size = 2,
                   .num_microbatches = 10, .microbatch_group_size_per_vp_stage = 4};
  CHECK_THROWS_WITH(make_schedule(s), Catch::Contains("= 2 is neither 0 nor >="));
}

namespace {

// Checks, for one shape, that every transfer has a partner on the neighbour rank, in the same
// order on both sides of each link, and that each compute has its input transfer before it.
void check_transfers_fit(const schedule_shape& shape) {
  const int pp = shape.pipeline_model_parallel_size;
  const int vp = shape.virtual_pipeline_model_parallel_size;
  const auto ranks = trace_all_ranks(shape);
  // (src, dst, is_gradient) -> sequence of (microbatch, chunk on dst)
  std::map<std::tuple<int, int, bool>, std::vector<std::pair<int, int>>> sent, received;
  for (int r = 0; r < pp; ++r) {
    std::set<std::pair<int, int>> have_input, have_grad, done_forward, done_backward;
    for (const action& a : ranks[r]) {
      const int stage = a.chunk * pp + r;
      const std::pair<int, int> key{a.microbatch, a.chunk};
      switch (a.kind) {
        case op::send_forward:
          REQUIRE(done_forward.count(key));
          REQUIRE(stage + 1 < pp * vp);
          sent[{r, (r + 1) % pp, false}].push_back({a.microbatch, r == pp - 1 ? a.chunk + 1 : a.chunk});
          break;
        case op::send_backward:
          REQUIRE(done_backward.count(key));
          REQUIRE(stage > 0);
          sent[{r, (r + pp - 1) % pp, true}].push_back({a.microbatch, r == 0 ? a.chunk - 1 : a.chunk});
          break;
        case op::recv_forward:
          REQUIRE(have_input.insert(key).second);
          received[{(r + pp - 1) % pp, r, false}].push_back(key);
          break;
        case op::recv_backward:
          REQUIRE(have_grad.insert(key).second);
          received[{(r + 1) % pp, r, true}].push_back(key);
          break;
        case op::forward:
          REQUIRE(have_input.count(key) == (stage > 0 ? 1u : 0u));
          done_forward.insert(key);
          break;
        case op::backward:
          REQUIRE(have_grad.count(key) == (stage < pp * vp - 1 ? 1u : 0u));
          done_backward.insert(key);
          break;
        case op::backward_weight:
          FAIL("a weight pass in a schedule that does not split the backward");
          break;
      }
    }
  }
  CHECK(sent == received);
}

}  // namespace

TEST_CASE("every send meets its receive in the same order on both sides of each link") {
  for (int pp : {2, 3, 4, 5})
    for (int vp : {1, 2, 3})
      for (int m = 1; m <= 11; ++m)
        for (int g : {0, pp + 1, m})
          for (bool overlap : {true, false})
            for (bool forward_only : {false, true})
              for (bool combined : {false, true}) {
                schedule_shape s{.pipeline_model_parallel_size = pp,
                                 .virtual_pipeline_model_parallel_size = vp,
                                 .num_microbatches = m,
                                 .microbatch_group_size_per_vp_stage = g,
                                 .overlap_p2p_comm = overlap,
                                 .forward_only = forward_only,
                                 .combined_1f1b = combined};
                if (!validate(s).empty()) continue;
                INFO("pp=" << pp << " vp=" << vp << " m=" << m << " g=" << g << " overlap="
                           << overlap << " forward_only=" << forward_only << " combined=" << combined);
                check_transfers_fit(s);
                s.kind = schedule_kind::gpipe;
                if (vp == 1 && !combined) check_transfers_fit(s);
              }
}
