// Tests for schedules/action.hpp: the text form printed by `mactor schedule`.
#include "schedules/action.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>

using namespace mactor::schedules;

TEST_CASE("actions print as kind, microbatch and chunk") {
  CHECK(to_string(action{op::forward, 3, 1}) == "F3.1");
  CHECK(to_string(action{op::backward, 0, 0}) == "B0.0");
  CHECK(to_string(action{op::recv_forward, 12, 2}) == "RF12.2");
  CHECK(to_string(action{op::send_backward, 7, 0}) == "SB7.0");
  CHECK(to_string({action{op::send_forward, 1, 0}, action{op::recv_backward, 2, 3}}) ==
        "SF1.0 RB2.3");
}

TEST_CASE("parsing reads back what printing writes, chunk 0 when omitted") {
  auto got = parse_actions("F0 B0  RF1.2 SF10.3 RB4.1 SB2");
  REQUIRE(got.size() == 6);
  CHECK(got[0] == action{op::forward, 0, 0});
  CHECK(got[1] == action{op::backward, 0, 0});
  CHECK(got[2] == action{op::recv_forward, 1, 2});
  CHECK(got[3] == action{op::send_forward, 10, 3});
  CHECK(got[4] == action{op::recv_backward, 4, 1});
  CHECK(got[5] == action{op::send_backward, 2, 0});
  CHECK(to_string(got) == "F0.0 B0.0 RF1.2 SF10.3 RB4.1 SB2.0");
  CHECK(parse_actions("").empty());
}

TEST_CASE("a malformed action token is rejected by name") {
  CHECK_THROWS_AS(parse_actions("F0 X1"), std::invalid_argument);
  CHECK_THROWS_WITH(parse_actions("F"), Catch::Contains("'F'"));
  CHECK_THROWS_AS(parse_actions("F1."), std::invalid_argument);
  CHECK_THROWS_AS(parse_actions("B-1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_actions("RF1.x"), std::invalid_argument);
}

TEST_CASE("only forward and backward count as compute") {
  CHECK(is_compute(op::forward));
  CHECK(is_compute(op::backward));
  CHECK_FALSE(is_compute(op::recv_forward));
  CHECK_FALSE(is_compute(op::send_backward));
}
