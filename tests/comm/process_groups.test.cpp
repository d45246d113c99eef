// Process groups against Megatron's documented layout (the 16-GPU example in
// parallel_state.initialize_model_parallel) and against a brute-force partition check.
#include "comm/process_groups.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <stdexcept>

using namespace mactor::comm;

namespace {
std::vector<int> tp_of(int world, int rank, parallel_sizes s) {
  return process_groups(world, rank, s).tp_group().ranks;
}
}  // namespace

TEST_CASE("groups match Megatron's 16-rank example with tp 2 and pp 4") {
  // Megatron's docstring: 8 tensor groups [g0,g1] [g2,g3] ..., 4 pipeline groups
  // [g0,g4,g8,g12] [g1,g5,g9,g13] ..., 8 data groups [g0,g2] [g1,g3] [g4,g6] ...
  const parallel_sizes s{.tp = 2, .pp = 4};
  CHECK(tp_of(16, 5, s) == std::vector<int>{4, 5});
  process_groups g(16, 5, s);
  CHECK(g.dp() == 2);
  CHECK(g.pp_group().ranks == std::vector<int>{1, 5, 9, 13});
  CHECK(g.dp_group().ranks == std::vector<int>{5, 7});
  CHECK(g.model_parallel_group().ranks == std::vector<int>{0, 1, 4, 5, 8, 9, 12, 13});
  CHECK(g.pipeline_next() == 9);
  CHECK(g.pipeline_prev() == 1);
  process_groups last(16, 13, s);
  CHECK(last.is_last_stage());
  CHECK(last.pipeline_next() == 1);  // Megatron wraps around
}

TEST_CASE("the rank formula puts tp fastest, then cp, dp and pp") {
  const parallel_sizes s{.tp = 2, .pp = 2, .cp = 3};
  const int world = 2 * 2 * 3 * 2;  // dp = 2
  for (int r = 0; r < world; ++r) {
    process_groups g(world, r, s);
    const rank_coords c = g.coords();
    CHECK(c.tp + 2 * (c.cp + 3 * (c.dp + 2 * c.pp)) == r);
    CHECK(g.rank_of(c) == r);
  }
  process_groups g(world, 7, s);  // tp 1, cp 0, dp 1, pp 0
  CHECK(g.cp_group().ranks == std::vector<int>{7, 9, 11});
  CHECK(g.dp_group().ranks == std::vector<int>{1, 7});
  CHECK(g.dp_cp_group().ranks == std::vector<int>{1, 3, 5, 7, 9, 11});
}

TEST_CASE("each kind of group partitions the world and ids never collide on shared ranks") {
  const parallel_sizes s{.tp = 2, .pp = 2, .cp = 1, .ep = 2};
  const int world = 16;
  using getter = group (process_groups::*)() const;
  const std::vector<getter> kinds{&process_groups::tp_group,      &process_groups::cp_group,
                                  &process_groups::dp_group,      &process_groups::pp_group,
                                  &process_groups::dp_cp_group,   &process_groups::model_parallel_group,
                                  &process_groups::ep_group,      &process_groups::expert_tp_group,
                                  &process_groups::expert_dp_group};
  for (getter k : kinds) {
    std::set<std::vector<int>> distinct;
    for (int r = 0; r < world; ++r) {
      const group grp = (process_groups(world, r, s).*k)();
      CHECK(std::count(grp.ranks.begin(), grp.ranks.end(), r) == 1);
      // every member computes the same list and id
      for (int m : grp.ranks) {
        const group other = (process_groups(world, m, s).*k)();
        CHECK(other.ranks == grp.ranks);
        CHECK(other.id == grp.id);
      }
      distinct.insert(grp.ranks);
    }
    std::size_t covered = 0;
    for (const auto& d : distinct) covered += d.size();
    CHECK(covered == static_cast<std::size_t>(world));
  }
  // Groups of different kinds that share a rank get different ids.
  for (int r = 0; r < world; ++r) {
    process_groups g(world, r, s);
    std::set<std::uint32_t> ids;
    for (getter k : kinds) ids.insert((g.*k)().id);
    CHECK(ids.size() == kinds.size());
  }
}

TEST_CASE("expert groups follow Megatron's tp-ep-dp-pp order without cp") {
  // world 8, tp 1, ep 4, pp 1: expert_dp = 2; ep group of rank 5 = {4,5,6,7}.
  process_groups g(8, 5, {.tp = 1, .ep = 4});
  CHECK(g.expert_dp() == 2);
  CHECK(g.ep_group().ranks == std::vector<int>{4, 5, 6, 7});
  CHECK(g.expert_dp_group().ranks == std::vector<int>{1, 5});
  // etp defaults to tp: with tp 2, ep 2 on 8 ranks the expert-tensor group equals the tp group.
  process_groups h(8, 3, {.tp = 2, .ep = 2});
  CHECK(h.expert_tp_group().ranks == h.tp_group().ranks);
  CHECK(h.ep_group().ranks == std::vector<int>{1, 3});
}

TEST_CASE("a world that does not divide is refused with the sizes named") {
  CHECK_THROWS_WITH(process_groups(6, 0, {.tp = 4}),
                    Catch::Contains("not divisible by tp*pp*cp = 4"));
  CHECK_THROWS_WITH(process_groups(6, 0, {.tp = 1, .ep = 4}),
                    Catch::Contains("etp*ep*pp = 4"));
}

namespace {

// Megatron-Core's RankGenerator (its own code, from the venv) for one layout: token -> groups.
std::map<std::string, std::vector<std::vector<int>>> megatron_groups(int world, parallel_sizes s,
                                                                     const std::string& order) {
  const std::string command = std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                              "/tests/comm/rank_generator_reference.py " + std::to_string(world) + " " +
                              std::to_string(s.tp) + " " + std::to_string(s.cp) + " " + std::to_string(s.pp) +
                              " " + order;
  std::map<std::string, std::vector<std::vector<int>>> out;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  char line[65536];
  while (std::fgets(line, sizeof line, pipe)) {
    std::istringstream in(line);
    std::string token, group;
    in >> token;
    while (in >> group) {
      std::vector<int> ranks;
      std::istringstream members(group);
      for (std::string r; std::getline(members, r, ',');) ranks.push_back(std::stoi(r));
      out[token].push_back(ranks);
    }
  }
  REQUIRE(pclose(pipe) == 0);
  return out;
}

}  // namespace

TEST_CASE("every rank's groups equal Megatron-Core's RankGenerator, in both orders (--use-tp-pp-dp-mapping)") {
  struct layout {
    int world;
    parallel_sizes sizes;
  };
  const layout layouts[] = {{16, {.tp = 2, .pp = 4}}, {16, {.tp = 2, .pp = 2, .cp = 2}}, {24, {.tp = 2, .pp = 3}},
                            {8, {.tp = 1, .pp = 2}}, {32, {.tp = 4, .pp = 2, .cp = 2}}};
  for (const auto& l : layouts)
    for (bool mapping : {false, true}) {
      auto s = l.sizes;
      s.tp_pp_dp_mapping = mapping;
      const auto want = megatron_groups(l.world, s, mapping ? "tp-cp-ep-pp-dp" : "tp-cp-ep-dp-pp");
      for (int r = 0; r < l.world; ++r) {
        INFO("world " << l.world << " tp " << s.tp << " cp " << s.cp << " pp " << s.pp << " mapping " << mapping
                      << " rank " << r);
        const process_groups g(l.world, r, s);
        auto holds = [&](const std::string& token, const std::vector<int>& ranks) {
          const auto& groups = want.at(token);
          return std::find(groups.begin(), groups.end(), ranks) != groups.end();
        };
        CHECK(holds("tp", g.tp_group().ranks));
        CHECK(holds("cp", g.cp_group().ranks));
        CHECK(holds("dp", g.dp_group().ranks));
        CHECK(holds("pp", g.pp_group().ranks));
        CHECK(holds("dp-cp", g.dp_cp_group().ranks));
        CHECK(holds("tp-pp", g.model_parallel_group().ranks));
        CHECK(g.rank_of(g.coords()) == r);
      }
    }
}

TEST_CASE("hierarchical context-parallel groups are Megatron's create_hierarchical_groups") {
  // Megatron's docstring example: 16 ranks, sizes [2, 2, 4].
  const std::vector<std::vector<std::vector<int>>> want = {
      {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}},
      {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}},
      {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}};
  for (int r = 0; r < 16; ++r) {
    INFO("rank " << r);
    const process_groups g(16, r, {.cp = 16});
    const auto levels = g.hierarchical_cp_groups({2, 2, 4});
    REQUIRE(levels.size() == 3);
    for (std::size_t l = 0; l < 3; ++l) {
      const auto& groups = want[l];
      CHECK(std::find(groups.begin(), groups.end(), levels[l].ranks) != groups.end());
      CHECK(std::find(levels[l].ranks.begin(), levels[l].ranks.end(), r) != levels[l].ranks.end());
      CHECK(levels[l].id != g.cp_group().id);
    }
    CHECK(levels[0].id != levels[1].id);
  }
  // Under tensor parallelism the context-parallel group is strided: rank 1's is {1, 3, 5, 7}.
  const process_groups g(8, 1, {.tp = 2, .cp = 4});
  const auto levels = g.hierarchical_cp_groups({2, 2});
  CHECK(levels[0].ranks == std::vector<int>{1, 3});
  CHECK(levels[1].ranks == std::vector<int>{1, 5});
  CHECK_THROWS_WITH(g.hierarchical_cp_groups({2, 3}), Catch::Contains("multiply to 6, not the context-parallel size 4"));
}
