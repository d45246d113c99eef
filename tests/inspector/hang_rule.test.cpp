// The hang rule: which ranks made no progress for the distributed timeout.
#include <catch2/catch.hpp>

#include "inspector/hang_rule.hpp"

using mactor::inspector::actor_status;
using mactor::inspector::hang_rule;
using mactor::inspector::job_snapshot;
using namespace std::chrono_literals;

namespace {

actor_status stage(int rank, std::string activity, double seconds) {
  actor_status a;
  a.name = "stage/" + std::to_string(rank);
  a.kind = "stage";
  a.rank = rank;
  a.activity = std::move(activity);
  a.activity_seconds = seconds;
  return a;
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("hang rule: a rank whose reports stop is named with its last activity, and its waiting peer too") {
  hang_rule rule(600, 5.0);
  rule.iteration(0);
  rule.iteration(1);  // the first iteration is done: the after-init timeout holds
  REQUIRE(rule.timeout_s() == 5.0);
  const auto t0 = hang_rule::clock::now();
  rule.heard_from(0, t0);
  rule.heard_from(1, t0);
  job_snapshot s;
  s.actors = {stage(0, "awaiting data-parallel all-reduce of 1 KiB with ranks 0, 1", 4.0), stage(1, "forward mb 2 chunk 0", 4.0)};
  for (auto t = t0; t <= t0 + 4s; t += 500ms) {
    rule.heard_from(0, t);
    CHECK(rule.check(s, t).empty());
  }
  s.actors[0].activity_seconds = 6.0;
  const auto lines = rule.check(s, t0 + 5500ms);
  REQUIRE(lines.size() == 2);
  CHECK(mentions(lines, "rank 1 sent no status for 5.5 s"));
  CHECK(mentions(lines, "its stage was last: forward mb 2 chunk 0"));
  CHECK(mentions(lines, "rank 0 stage waits 6.0 s: awaiting data-parallel all-reduce"));
}

TEST_CASE("hang rule: a slow rank that reports and moves on is not hung, and idle is no hang") {
  hang_rule rule(600, 2.0);
  rule.iteration(3);
  rule.iteration(4);
  const auto t0 = hang_rule::clock::now();
  job_snapshot s;
  s.actors = {stage(0, "idle", 50.0), stage(1, "backward mb 1 chunk 0", 1.9)};
  for (auto t = t0; t <= t0 + 10s; t += 500ms) {
    rule.heard_from(0, t);
    rule.heard_from(1, t);
    CHECK(rule.check(s, t).empty());
  }
  s.actors[1].activity_seconds = 2.5;  // one step past the timeout: a stuck kernel
  const auto lines = rule.check(s, t0 + 10s);
  REQUIRE(lines.size() == 1);
  CHECK(mentions(lines, "rank 1 stage made no progress for 2.5 s in: backward mb 1 chunk 0"));
}

TEST_CASE("hang rule: the minutes timeout holds until the first iteration after start is done") {
  hang_rule rule(120, 2.0);
  rule.iteration(7);  // resumed at iteration 7
  CHECK(rule.timeout_s() == 120);
  rule.iteration(7);
  CHECK(rule.timeout_s() == 120);
  rule.iteration(8);
  CHECK(rule.timeout_s() == 2.0);
  hang_rule minutes_only(60, std::nullopt);
  minutes_only.iteration(0);
  minutes_only.iteration(5);
  CHECK(minutes_only.timeout_s() == 60);
}

TEST_CASE("hang rule: a coordinator that did not run for half the timeout starts every clock over") {
  hang_rule rule(4, std::nullopt);
  const auto t0 = hang_rule::clock::now();
  rule.heard_from(1, t0);
  job_snapshot s;
  CHECK(rule.check(s, t0).empty());
  CHECK(rule.check(s, t0 + 10s).empty());  // reports may wait in its mailbox
  CHECK(rule.check(s, t0 + 12s).empty());
  CHECK(rule.check(s, t0 + 14s).empty());
  CHECK_FALSE(rule.check(s, t0 + 14500ms).empty());
}

TEST_CASE("hang rule: a one-second timeout names a silent rank although the coordinator checks every 0.6 s") {
  // --distributed-timeout-seconds-after-init 1 with the coordinator's 0.5 s tick (and a little
  // handling): each gap is past half the timeout, yet the coordinator ran all along.
  hang_rule rule(60, 1.0, 0.5);
  rule.iteration(0);
  rule.iteration(1);
  REQUIRE(rule.timeout_s() == 1.0);
  const auto t0 = hang_rule::clock::now();
  rule.heard_from(0, t0);
  rule.heard_from(2, t0);
  job_snapshot s;
  std::vector<std::string> lines;
  for (int k = 0; k <= 3 && lines.empty(); ++k) {
    const auto now = t0 + k * 600ms;
    rule.heard_from(0, now);  // rank 0 keeps reporting, rank 2 was stopped at t0
    lines = rule.check(s, now);
  }
  REQUIRE(lines.size() == 1);
  CHECK(mentions(lines, "rank 2 sent no status for 1.2 s"));
  // A real pause of the coordinator (past two check periods) still starts the clocks over.
  hang_rule paused(60, 1.0, 0.5);
  paused.iteration(0);
  paused.iteration(1);
  paused.heard_from(2, t0);
  CHECK(paused.check(s, t0).empty());
  CHECK(paused.check(s, t0 + 1500ms).empty());
  CHECK(paused.check(s, t0 + 2000ms).empty());
  CHECK_FALSE(paused.check(s, t0 + 2600ms).empty());
}

TEST_CASE("hang rule: the shorter timeout after the first iteration judges each rank's silence from its start") {
  // A start-up of 3 s before any stage report (model building) is no hang under the seconds
  // timeout that begins with the first iteration; a rank silent for the timeout after it is.
  hang_rule rule(60, 1.0, 0.5);
  const auto t0 = hang_rule::clock::now();
  rule.iteration(0, t0);
  rule.heard_from(1, t0);  // its hello
  rule.heard_from(2, t0);
  job_snapshot s;
  for (auto at = t0; at < t0 + 3000ms; at += 500ms) CHECK(rule.check(s, at).empty());  // the coordinator ticks
  rule.iteration(1, t0 + 3000ms);
  for (auto at = t0 + 3000ms; at <= t0 + 4000ms; at += 500ms) {
    rule.heard_from(1, at);
    CHECK(rule.check(s, at).empty());
  }
  rule.heard_from(1, t0 + 4500ms);
  const auto lines = rule.check(s, t0 + 4500ms);
  REQUIRE(lines.size() == 1);
  CHECK(mentions(lines, "rank 2 sent no status for 1.5 s"));
}
