// job_snapshot's JSON: every field survives a round trip, under the key names the web page reads.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "inspector/job_snapshot.hpp"

using namespace mactor::inspector;

namespace {

job_snapshot unusual_snapshot() {
  job_snapshot s;
  s.iteration = 5'000'000'001;
  s.train_iters = 9'000'000'000;
  s.uptime_s = 1234.5678;
  s.actors.push_back({"stage/3", "stage", 3, "awaiting recv_backward mb 7 chunk 1 from rank 12 \xc3\xa9 \"q\"",
                      12.4, 17, 1500.25, 5'000'000'000'000, 7, 3'000'000'000, 4'000'000'001, 6'000'000'002, 123});
  s.actors.push_back({"checkpointer/0", "checkpointer", 0, "", 0, 0, 0, 0, 0});
  s.last_iteration_timeline.push_back({3, "B", 7, 1, 0.125, 0.25});
  s.last_iteration_timeline.push_back({0, "dp-sync", -1, 0, 1e-6, 2e-6});
  s.stalls = {"rank 3 stage waits 12.4 s: something", ""};
  s.expert_load_iteration = 4'000'000'007;
  s.expert_load = {{"decoder.layers.1.mlp.router", {1, 0, 2.5e9}}, {"mtp.layers.0.mlp.router", {}}};
  return s;
}

}  // namespace

TEST_CASE("a job snapshot survives a JSON round trip field for field") {
  const job_snapshot a = unusual_snapshot();
  const job_snapshot b = snapshot_from_json_text(to_json_text(a));
  CHECK(b.iteration == a.iteration);
  CHECK(b.train_iters == a.train_iters);
  CHECK(b.uptime_s == a.uptime_s);
  REQUIRE(b.actors.size() == a.actors.size());
  for (std::size_t i = 0; i < a.actors.size(); ++i) {
    CHECK(b.actors[i].name == a.actors[i].name);
    CHECK(b.actors[i].kind == a.actors[i].kind);
    CHECK(b.actors[i].rank == a.actors[i].rank);
    CHECK(b.actors[i].activity == a.actors[i].activity);
    CHECK(b.actors[i].activity_seconds == a.actors[i].activity_seconds);
    CHECK(b.actors[i].mailbox_depth == a.actors[i].mailbox_depth);
    CHECK(b.actors[i].messages_per_second == a.actors[i].messages_per_second);
    CHECK(b.actors[i].bytes_sent == a.actors[i].bytes_sent);
    CHECK(b.actors[i].bytes_received == a.actors[i].bytes_received);
    CHECK(b.actors[i].memory_allocated == a.actors[i].memory_allocated);
    CHECK(b.actors[i].memory_max_allocated == a.actors[i].memory_max_allocated);
    CHECK(b.actors[i].memory_reserved == a.actors[i].memory_reserved);
    CHECK(b.actors[i].memory_activations == a.actors[i].memory_activations);
  }
  REQUIRE(b.last_iteration_timeline.size() == a.last_iteration_timeline.size());
  for (std::size_t i = 0; i < a.last_iteration_timeline.size(); ++i) {
    const auto &x = a.last_iteration_timeline[i], &y = b.last_iteration_timeline[i];
    CHECK(y.rank == x.rank);
    CHECK(y.op == x.op);
    CHECK(y.microbatch == x.microbatch);
    CHECK(y.chunk == x.chunk);
    CHECK(y.start_s == x.start_s);
    CHECK(y.end_s == x.end_s);
  }
  CHECK(b.stalls == a.stalls);
  CHECK(b.expert_load_iteration == a.expert_load_iteration);
  REQUIRE(b.expert_load.size() == a.expert_load.size());
  for (std::size_t i = 0; i < a.expert_load.size(); ++i) {
    CHECK(b.expert_load[i].router == a.expert_load[i].router);
    CHECK(b.expert_load[i].tokens == a.expert_load[i].tokens);
  }
}

TEST_CASE("an older job's snapshot without the expert load reads as none") {
  auto j = nlohmann::json::parse(to_json_text(unusual_snapshot()));
  j.erase("expert_load"), j.erase("expert_load_iteration");
  const auto s = snapshot_from_json_text(j.dump());
  CHECK(s.expert_load_iteration == 0);
  CHECK(s.expert_load.empty());
}

TEST_CASE("the snapshot JSON uses the field names as keys") {
  const auto j = nlohmann::json::parse(to_json_text(unusual_snapshot()));
  CHECK(j["iteration"] == 5'000'000'001);
  CHECK(j["actors"][0]["bytes_sent"] == 5'000'000'000'000);
  CHECK(j["actors"][0]["memory_max_allocated"] == 4'000'000'001);
  CHECK(j["actors"][0]["mailbox_depth"] == 17);
  CHECK(j["actors"][0]["messages_per_second"] == 1500.25);
  CHECK(j["actors"][0]["activity_seconds"] == 12.4);
  CHECK(j["last_iteration_timeline"][0]["start_s"] == 0.125);
  CHECK(j["last_iteration_timeline"][1]["op"] == "dp-sync");
  CHECK(j["stalls"].size() == 2);
  CHECK(j["expert_load"][0]["router"] == "decoder.layers.1.mlp.router");
  CHECK(j["expert_load"][0]["tokens"][2] == 2.5e9);
}

TEST_CASE("a snapshot missing a key is refused with the key named") {
  auto j = nlohmann::json::parse(to_json_text(unusual_snapshot()));
  j["actors"][1].erase("activity");
  CHECK_THROWS_WITH(snapshot_from_json_text(j.dump()), Catch::Contains("activity"));
  CHECK_THROWS_WITH(snapshot_from_json_text("{not json"), Catch::Contains("not a job snapshot"));
}

TEST_CASE("invalid UTF-8 in an activity does not break the snapshot") {
  job_snapshot s = unusual_snapshot();
  s.actors[0].activity = "bad \xff byte";
  const job_snapshot b = snapshot_from_json_text(to_json_text(s));
  CHECK(b.actors[0].activity.rfind("bad ", 0) == 0);
  CHECK(b.actors[0].activity.find("byte") != std::string::npos);
}
