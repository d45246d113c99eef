// Host lists, hostfiles and Open MPI's rank mappings, checked on hand-worked layouts (the whole-job
// test in launcher_env.test.cpp checks the same rules against mpirun --display-map).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "tools/launcher/host_map.hpp"

using namespace mactor::tools;

namespace {
launch_options with(std::vector<int> nps) {
  launch_options o;
  for (int n : nps) o.contexts.push_back({n, {"p"}, {}});
  return o;
}
std::vector<int> hosts_of(const job_layout& L) {
  std::vector<int> h;
  for (auto& p : L.ranks) h.push_back(p.host);
  return h;
}
}  // namespace

TEST_CASE("host lists add slots for repeated names and default to one slot") {
  auto h = parse_host_list("a:2,b,a");
  REQUIRE(h.size() == 2);
  CHECK(h[0].name == "a");
  CHECK(h[0].slots == 3);
  CHECK(h[1].slots == 1);
  CHECK_THROWS_WITH(parse_host_list("a:0"), Catch::Contains("slot count '0'"));
}

TEST_CASE("hostfiles read slots= and skip comments") {
  std::string path = "/tmp/mactor_hostfile_test_" + std::to_string(::getpid());
  std::ofstream(path) << "# cluster\nn1 slots=4\nn2   # one slot\nn3 slots=2 max_slots=8\n";
  auto h = parse_hostfile(path, 1);
  std::remove(path.c_str());
  REQUIRE(h.size() == 3);
  CHECK(h[0].slots == 4);
  CHECK(h[1].slots == 1);
  CHECK(h[2].slots == 2);
}

TEST_CASE("by-slot mapping fills each host in order") {
  auto o = with({3});
  o.host_lists = {"a:2,b:2"};
  auto L = map_ranks(o, 8);
  CHECK(hosts_of(L) == std::vector<int>{0, 0, 1});
  CHECK(L.local_size == std::vector<int>{2, 1});
  CHECK(L.ranks[2].local_rank == 0);
  CHECK(L.node_rank == std::vector<int>{0, 1});
}

TEST_CASE("by-node mapping deals ranks round-robin") {
  auto o = with({3});
  o.host_lists = {"a:2,b:2"};
  o.map_by_node = true;
  CHECK(hosts_of(map_ranks(o, 8)) == std::vector<int>{0, 1, 0});
}

TEST_CASE("npernode puts N ranks on each host and fills np from it") {
  auto o = with({0});
  o.host_lists = {"a:2,b:2,c:2"};
  o.npernode = 1;
  auto L = map_ranks(o, 8);
  CHECK(o.contexts[0].np == 3);
  CHECK(hosts_of(L) == std::vector<int>{0, 1, 2});
}

TEST_CASE("oversubscribed ranks beyond the slots go round-robin, as Open MPI places them") {
  auto o = with({5});
  o.host_lists = {"a:1,b:1"};
  CHECK_THROWS_WITH(map_ranks(o, 8), Catch::Contains("not enough slots"));
  o.oversubscribe = true;
  CHECK(hosts_of(map_ranks(o, 8)) == std::vector<int>{0, 0, 0, 1, 1});
}

TEST_CASE("contexts number their ranks consecutively") {
  auto o = with({2, 3});
  auto L = map_ranks(o, 8);
  CHECK(L.ranks[1].context == 0);
  CHECK(L.ranks[2].context == 1);
  CHECK(L.world_size() == 5);
}

TEST_CASE("with no hosts, the local host has one slot per core") {
  auto o = with({0});
  auto L = map_ranks(o, 6);
  CHECK(L.world_size() == 6);
  CHECK(L.hosts[0].name == "localhost");
}
