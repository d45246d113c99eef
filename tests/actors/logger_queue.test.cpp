// The bound on the logger's mailbox: what is sent, what is left out, and the notices naming it.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "actors/logger_queue.hpp"

using mactor::actors::logger_queue;

TEST_CASE("the logger queue sends while fewer than its capacity wait and names every iteration it leaves out") {
  logger_queue q(3);
  std::int64_t handled = 0;
  // Three records go while the logger handles none; the fourth and fifth are left out.
  for (int i = 1; i <= 3; ++i) {
    REQUIRE(q.admit(i, handled));
    q.sent();
  }
  CHECK(q.waiting(handled) == 3);
  std::optional<std::string> started;
  CHECK_FALSE(q.admit(4, handled, &started));
  REQUIRE(started);
  CHECK(*started == "mactor: the logger has 3 messages waiting (MACTOR_LOGGER_QUEUE=3): iteration 4 and later ones "
                    "go unlogged until it catches up; training does not wait");
  started.reset();
  CHECK_FALSE(q.admit(5, handled, &started));
  CHECK_FALSE(started);  // said once per run of refusals
  // The logger catches up by one: still no room for the record and the notice naming the gap.
  handled = 1;
  CHECK_FALSE(q.admit(6, handled));
  // By two: the seventh goes, and the notice names 4-6.
  handled = 2;
  CHECK(q.admit(7, handled));
  const auto notice = q.take_notice();
  REQUIRE(notice);
  CHECK(*notice == "mactor: the logger fell behind (MACTOR_LOGGER_QUEUE=3): 3 iteration records (iterations 4-6) were "
                   "not logged; the next line averages over the iterations it saw");
  CHECK_FALSE(q.take_notice());
  q.sent();  // the notice
  q.sent();  // the record
  CHECK(q.waiting(handled) == 3);
  // A single refusal is named in the singular.
  CHECK_FALSE(q.admit(8, handled));
  handled = 5;
  CHECK(q.admit(9, handled));
  CHECK(q.take_notice() == std::optional<std::string>("mactor: the logger fell behind (MACTOR_LOGGER_QUEUE=3): 1 iteration "
                                                      "record (iteration 8) was not logged; the next line averages over "
                                                      "the iterations it saw"));
  CHECK(q.dropped_total() == 4);
}

TEST_CASE("MACTOR_LOGGER_QUEUE must be a positive integer") {
  ::unsetenv("MACTOR_LOGGER_QUEUE");
  CHECK(logger_queue::from_env().capacity() == logger_queue::default_capacity);
  ::setenv("MACTOR_LOGGER_QUEUE", "16", 1);
  CHECK(logger_queue::from_env().capacity() == 16);
  for (const char* bad : {"0", "-3", "many", "12k"}) {
    INFO(bad);
    ::setenv("MACTOR_LOGGER_QUEUE", bad, 1);
    CHECK_THROWS_WITH(logger_queue::from_env(), "MACTOR_LOGGER_QUEUE='" + std::string(bad) +
                                                    "' is not a positive number of messages (e.g. MACTOR_LOGGER_QUEUE=1000)");
  }
  ::unsetenv("MACTOR_LOGGER_QUEUE");
}
