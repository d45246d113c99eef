// snapshot_store: activities age between reports, so a stall shows up although the stalled
// actor sends nothing more; reports replace, removals forget.
#include <catch2/catch.hpp>
#include <thread>

#include "inspector/snapshot_store.hpp"

using namespace mactor::inspector;
using clock_type = snapshot_store::clock;
using std::chrono::milliseconds;

namespace {

actor_status stage(int rank, std::string activity) {
  return {"stage/" + std::to_string(rank), "stage", rank, std::move(activity), 0, 0, 0, 0, 0};
}

}  // namespace

TEST_CASE("a waiting stage becomes a stall once its wait passes the threshold") {
  snapshot_store store(5.0);
  const auto t0 = clock_type::now();
  store.report(stage(1, "awaiting recv_backward mb 7 chunk 0 from rank 2"), t0);
  store.report(stage(2, "forward mb 9 chunk 0"), t0 + milliseconds(4000));

  auto early = store.snapshot(t0 + milliseconds(4500));
  REQUIRE(early.actors.size() == 2);
  CHECK(early.actors[0].activity_seconds == Approx(4.5));
  CHECK(early.actors[1].activity_seconds == Approx(0.5));
  CHECK(early.stalls.empty());

  auto late = store.snapshot(t0 + milliseconds(12400));
  CHECK(late.actors[0].activity_seconds == Approx(12.4));
  CHECK(late.stalls == std::vector<std::string>{
                           "rank 1 stage waits 12.4 s: awaiting recv_backward mb 7 chunk 0 from rank 2 "
                           "(rank 2 stage is: forward mb 9 chunk 0, for 8.4 s)"});
}

TEST_CASE("a new report replaces the actor's entry and remove forgets it") {
  snapshot_store store(1.0);
  const auto t0 = clock_type::now();
  store.report(stage(0, "awaiting recv_forward mb 0 chunk 0 from rank 1"), t0);
  store.report(stage(0, "forward mb 0 chunk 0"), t0 + milliseconds(3000));
  store.report({"logger", "logger", 0, "idle", 0, 3, 1.5, 0, 0}, t0);
  store.set_iteration(7, 50);
  store.set_last_iteration_timeline({{0, "F", 0, 0, 0.0, 0.001}});
  auto s = store.snapshot(t0 + milliseconds(3500));
  REQUIRE(s.actors.size() == 2);
  CHECK(s.actors[0].kind == "logger");  // sorted by rank, then kind
  CHECK(s.actors[0].mailbox_depth == 3);
  CHECK(s.actors[1].activity == "forward mb 0 chunk 0");
  CHECK(s.actors[1].activity_seconds == Approx(0.5));
  CHECK(s.stalls.empty());
  CHECK(s.iteration == 7);
  CHECK(s.train_iters == 50);
  CHECK(s.last_iteration_timeline.size() == 1);
  store.remove("logger");
  CHECK(store.snapshot().actors.size() == 1);
}

TEST_CASE("reports from many threads while snapshots are read lose nothing") {
  snapshot_store store;
  std::vector<std::thread> reporters;
  for (int r = 0; r < 4; ++r)
    reporters.emplace_back([&store, r] {
      for (int i = 0; i < 2000; ++i) store.report(stage(r, "forward mb " + std::to_string(i) + " chunk 0"));
    });
  std::size_t seen = 0;
  for (int i = 0; i < 200; ++i) seen = std::max(seen, store.snapshot().actors.size());
  for (auto& t : reporters) t.join();
  const auto s = store.snapshot();
  REQUIRE(s.actors.size() == 4);
  for (const auto& a : s.actors) CHECK(a.activity == "forward mb 1999 chunk 0");
  CHECK(seen <= 4);
}
