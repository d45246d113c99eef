// find_stalls: which waits are reported, and that each line names both ends of the stalled pair.
#include <catch2/catch.hpp>

#include "inspector/stall_report.hpp"

using namespace mactor::inspector;

namespace {

actor_status actor(std::string kind, int rank, std::string activity, double seconds) {
  return {kind + "/" + std::to_string(rank), kind, rank, std::move(activity), seconds, 0, 0, 0, 0};
}

}  // namespace

TEST_CASE("find_stalls names the waiting rank and what its peer rank is doing") {
  job_snapshot s;
  s.actors = {actor("logger", 12, "writing iteration 5", 0.1),
              actor("stage", 12, "forward mb 9 chunk 0", 0.3),
              actor("stage", 3, "awaiting recv_backward mb 7 chunk 1 from rank 12", 12.4)};
  CHECK(find_stalls(s, 5.0) ==
        std::vector<std::string>{"rank 3 stage waits 12.4 s: awaiting recv_backward mb 7 chunk 1 from "
                                 "rank 12 (rank 12 stage is: forward mb 9 chunk 0, for 0.3 s)"});
}

TEST_CASE("find_stalls skips short waits and activities that are not waits") {
  job_snapshot s;
  s.actors = {actor("stage", 0, "awaiting recv_forward mb 1 chunk 0 from rank 1", 4.9),
              actor("stage", 1, "forward mb 1 chunk 0 (awaiting nothing)", 60),
              actor("replica", 2, "awaiting", 5.0)};
  CHECK(find_stalls(s, 5.0).empty());
  auto lines = find_stalls(s, 4.95);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "rank 2 replica waits 5.0 s: awaiting");
  CHECK(find_stalls(s, 4.8).size() == 2);
}

TEST_CASE("find_stalls lists the longest wait first and says when the peer rank has no actor") {
  job_snapshot s;
  s.actors = {actor("stage", 0, "awaiting send_forward mb 2 chunk 0 to rank 1", 6.0),
              actor("replica", 1, "awaiting dp all-reduce of bucket 3 from rank 7", 9.5),
              actor("stage", 1, "awaiting recv_forward mb 2 chunk 0 from rank 0", 6.5)};
  auto lines = find_stalls(s, 5.0);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "rank 1 replica waits 9.5 s: awaiting dp all-reduce of bucket 3 from rank 7 "
                    "(rank 7 has no actor in the snapshot)");
  CHECK(lines[1] == "rank 1 stage waits 6.5 s: awaiting recv_forward mb 2 chunk 0 from rank 0 "
                    "(rank 0 stage is: awaiting send_forward mb 2 chunk 0 to rank 1, for 6.0 s)");
  CHECK(lines[2] == "rank 0 stage waits 6.0 s: awaiting send_forward mb 2 chunk 0 to rank 1 "
                    "(rank 1 stage is: awaiting recv_forward mb 2 chunk 0 from rank 0, for 6.5 s)");
}

TEST_CASE("find_stalls falls back to another kind of actor on the peer rank") {
  job_snapshot s;
  s.actors = {actor("checkpointer", 5, "writing shard 2 of 4", 1.3),
              actor("stage", 4, "awaiting recv_forward mb 0 chunk 0 from rank 5", 30)};
  CHECK(find_stalls(s, 5.0) ==
        std::vector<std::string>{"rank 4 stage waits 30.0 s: awaiting recv_forward mb 0 chunk 0 from "
                                 "rank 5 (rank 5 checkpointer is: writing shard 2 of 4, for 1.3 s)"});
}

TEST_CASE("find_stalls names the members a collective waits for and leaves out those in the same call") {
  job_snapshot s;
  s.actors = {actor("stage", 0, "awaiting data-parallel all-reduce of 1.5 MiB with ranks 2, 4, 6", 8.0),
              actor("stage", 2, "awaiting data-parallel all-reduce of 1.5 MiB with ranks 0, 4, 6", 7.9),
              actor("stage", 4, "backward mb 3 chunk 0", 8.1),
              actor("stage", 6, "awaiting data-parallel all-reduce of 1.5 MiB with ranks 0, 2, 4", 7.5)};
  auto lines = find_stalls(s, 5.0);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "rank 0 stage waits 8.0 s: awaiting data-parallel all-reduce of 1.5 MiB with ranks 2, 4, 6 "
                    "(rank 4 stage is: backward mb 3 chunk 0, for 8.1 s)");
  CHECK(lines[2] == "rank 6 stage waits 7.5 s: awaiting data-parallel all-reduce of 1.5 MiB with ranks 0, 2, 4 "
                    "(rank 4 stage is: backward mb 3 chunk 0, for 8.1 s)");
  // Everyone in the call: the report says so (the hang is inside the collective itself).
  s.actors[2] = actor("stage", 4, "awaiting data-parallel all-reduce of 1.5 MiB with ranks 0, 2, 6", 8.1);
  lines = find_stalls(s, 5.0);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "rank 4 stage waits 8.1 s: awaiting data-parallel all-reduce of 1.5 MiB with ranks 0, 2, 6 "
                    "(ranks 0, 2, 6 are in it too)");
  // A member with no actor in the snapshot is named.
  s.actors.pop_back();
  lines = find_stalls(s, 5.0);
  CHECK(lines[0] == "rank 4 stage waits 8.1 s: awaiting data-parallel all-reduce of 1.5 MiB with ranks 0, 2, 6 "
                    "(no actor in the snapshot for rank(s) 6)");
  // Two members: "with rank 1" is a single peer, described as a pair.
  s.actors = {actor("stage", 0, "awaiting tensor-parallel all-reduce of 4.0 KiB with rank 1", 6.0),
              actor("stage", 1, "stalled by the test hook", 6.2)};
  CHECK(find_stalls(s, 5.0) == std::vector<std::string>{"rank 0 stage waits 6.0 s: awaiting tensor-parallel all-reduce "
                                                        "of 4.0 KiB with rank 1 (rank 1 stage is: stalled by the test "
                                                        "hook, for 6.2 s)"});
}
