// FT_SIM_FAULT_DESC as Megatron's maybe_setup_simulated_fault reads it: TYPE;RANK;DELAY, the delay
// up to 20% longer, random type and rank drawn alike on every rank (from a shared seed), and a
// bad description named.
#include <catch2/catch.hpp>

#include <set>

#include "training/ft_simulated_fault.hpp"

namespace tr = mactor::training;

TEST_CASE("ft: a simulated fault names its type, its rank and a delay up to 20% past the base") {
  const auto f = tr::parse_simulated_fault("rank_hung;1;10", 4, 7);
  REQUIRE(f);
  CHECK(f->type == "rank_hung");
  CHECK(f->rank == 1);
  CHECK(f->delay_s >= 10);
  CHECK(f->delay_s <= 12);
  CHECK(tr::parse_simulated_fault(" rank_killed ; 3 ; 0 ", 4, 7)->type == "rank_killed");
  CHECK_FALSE(tr::parse_simulated_fault("", 4, 7));
}

TEST_CASE("ft: random draws are the same for the same seed, on every rank, and vary with it") {
  std::set<int> ranks;
  std::set<std::string> types;
  for (std::uint64_t seed = 0; seed < 64; ++seed) {
    const auto a = tr::parse_simulated_fault("random;;5", 8, seed);
    const auto b = tr::parse_simulated_fault("random;;5", 8, seed);
    REQUIRE(a);
    CHECK(a->rank == b->rank);
    CHECK(a->type == b->type);
    CHECK(a->delay_s == b->delay_s);
    CHECK(a->rank >= 0);
    CHECK(a->rank < 8);
    ranks.insert(a->rank);
    types.insert(a->type);
  }
  CHECK(ranks.size() > 4);
  CHECK(types == std::set<std::string>{"rank_hung", "rank_killed"});
}

TEST_CASE("ft: a bad simulated fault description is named") {
  CHECK_THROWS_WITH(tr::parse_simulated_fault("rank_slow;1;1", 4, 0), Catch::Contains("rank_slow"));
  CHECK_THROWS_WITH(tr::parse_simulated_fault("rank_hung;4;1", 4, 0), Catch::Contains("rank 4 is not in this job of 4"));
  CHECK_THROWS_WITH(tr::parse_simulated_fault("rank_hung;1", 4, 0), Catch::Contains("TYPE;RANK;DELAY"));
  CHECK_THROWS_WITH(tr::parse_simulated_fault("rank_hung;one;1", 4, 0), Catch::Contains("'one'"));
  CHECK_THROWS_WITH(tr::parse_simulated_fault("rank_hung;1;soon", 4, 0), Catch::Contains("'soon'"));
}
