// The UCX transport across real processes (fork), addresses exchanged through files: the
// collectives against the naive reference, ordering, and a killed rank surfacing as an error.
#include "comm/ucx_transport.hpp"

#include <catch2/catch.hpp>

#include "collective_reference.hpp"
#include "comm/collectives.hpp"
#include "comm/file_address_exchange.hpp"
#include "multi_process.hpp"

using namespace mactor::comm;
using mactor::comm::testing::temp_dir;
using namespace std::chrono_literals;

TEST_CASE("collectives over UCX match the reference on 2, 3 and 4 processes") {
  for (int world : {2, 3, 4}) {
    temp_dir dir;
    const auto pids = testing::spawn_ranks(world, [&](int r) {
      file_address_exchange exchange(dir.path);
      ucx_transport t(r, world, exchange);
      std::string failure;
      try {
        transport_communicator all(t, [&] {
          std::vector<int> v(world);
          for (int i = 0; i < world; ++i) v[i] = i;
          return v;
        }(), 1);
        for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000003}})
          if (failure.empty() && (world < 4 || count < 1000000))
            failure = testing::exercise_collectives(all, count);
        if (failure.empty() && world == 4) {
          // Two disjoint pairs at once, like tensor-parallel groups of a dp=2 layout.
          transport_communicator pair(t, {r - r % 2, r - r % 2 + 1}, 2 + r / 2);
          failure = testing::exercise_collectives(pair, 1000003);
        }
        t.shutdown();
      } catch (const std::exception& e) {
        failure = std::string("exception: ") + e.what();
      }
      dir.write("result_" + std::to_string(r), failure);
      return failure.empty() ? 0 : 1;
    });
    for (int r = 0; r < world; ++r) {
      INFO("world " << world << ", rank " << r << ": " << dir.read("result_" + std::to_string(r)));
      CHECK(testing::wait_rank(pids[r], 60s) == 0);
    }
  }
}

TEST_CASE("messages with one tag between two processes arrive in posting order") {
  temp_dir dir;
  const auto pids = testing::spawn_ranks(2, [&](int r) {
    file_address_exchange exchange(dir.path);
    ucx_transport t(r, 2, exchange);
    constexpr int messages = 64;
    // Mixed sizes so eager and rendezvous protocols interleave.
    std::vector<std::vector<int>> bufs(messages);
    std::vector<std::future<status>> fs;
    for (int i = 0; i < messages; ++i) {
      bufs[i].assign(i % 3 == 0 ? 100000 : 3, r == 0 ? i : -1);
      fs.push_back(r == 0 ? t.send_future(1, 7, bufs[i].data(), bufs[i].size() * 4)
                          : t.recv_future(0, 7, bufs[i].data(), bufs[i].size() * 4));
    }
    int bad = 0;
    for (auto& f : fs) bad += f.get().ok ? 0 : 1;
    std::int64_t total = 0;
    for (int i = 0; i < messages; ++i) {
      total += static_cast<std::int64_t>(bufs[i].size() * 4);
      for (int v : bufs[i]) bad += v != i;
    }
    // The traffic counters (the inspector's data-plane bytes) count exactly what completed.
    const std::int64_t sent = t.traffic().sent, received = t.traffic().received;
    t.shutdown();
    if (bad) return 1;
    if (r == 0 ? (sent != total || received != 0) : (received != total || sent != 0)) return 2;
    return 0;
  });
  CHECK(testing::wait_rank(pids[0], 30s) == 0);
  CHECK(testing::wait_rank(pids[1], 30s) == 0);
}

namespace {

// Three ranks all-reduce once, rank 2 is killed, and the survivors' next all-reduce must
// fail with an error naming rank 2 within 10 seconds of the kill.
void check_killed_rank_is_named(bool same_host_fast_path) {
  temp_dir dir;
  constexpr int world = 3, victim = 2;
  const auto pids = testing::spawn_ranks(world, [&](int r) {
    file_address_exchange exchange(dir.path);
    ucx_options options;
    options.same_host_fast_path = same_host_fast_path;
    ucx_transport t(r, world, exchange, options);
    transport_communicator all(t, {0, 1, 2}, 1);
    std::vector<float> x(1 << 20, 1.0f);
    all.all_reduce(std::span<float>(x));  // wires every connection
    dir.write("ready_" + std::to_string(r), "");
    if (r == victim) {
      for (;;) ::pause();
    }
    while (!std::filesystem::exists(dir.path / "killed"))
      std::this_thread::sleep_for(1ms);
    try {
      all.all_reduce(std::span<float>(x));
      dir.write("result_" + std::to_string(r), "no error");
      return 1;
    } catch (const comm_error& e) {
      dir.write("result_" + std::to_string(r), e.what());
      return e.rank() == victim ? 0 : 2;
    }
  });
  for (int r = 0; r < world; ++r)
    while (!std::filesystem::exists(dir.path / ("ready_" + std::to_string(r))))
      std::this_thread::sleep_for(1ms);
  // Let the survivors post their receives first, so the kill lands mid-operation.
  dir.write("killed", "");
  std::this_thread::sleep_for(100ms);
  ::kill(pids[victim], SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  testing::wait_rank(pids[victim], 5s);
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const int code = testing::wait_rank(pids[r], 10s);
    const auto elapsed = std::chrono::steady_clock::now() - killed_at;
    INFO("rank " << r << " said: " << dir.read("result_" + std::to_string(r)));
    CHECK(code == 0);
    CHECK(elapsed < 10s);
    CHECK_THAT(dir.read("result_" + std::to_string(r)), Catch::Contains("rank 2"));
  }
}

}  // namespace

TEST_CASE("a killed UCX rank on this host becomes an error naming it within 10 seconds") {
  check_killed_rank_is_named(true);
}

TEST_CASE("a killed UCX rank behind peer error handling becomes an error naming it") {
  check_killed_rank_is_named(false);
}

TEST_CASE("a transport destroyed without shutdown releases its peers cleanly") {
  temp_dir dir;
  const auto pids = testing::spawn_ranks(2, [&](int r) {
    file_address_exchange exchange(dir.path);
    {
      ucx_transport t(r, 2, exchange);
      // Both must have connected first: a rank that tore down before its peer connected
      // would leave an address whose shared memory is gone.
      dir.write("connected_" + std::to_string(r), "");
      while (!std::filesystem::exists(dir.path / ("connected_" + std::to_string(1 - r))))
        std::this_thread::sleep_for(1ms);
      std::vector<char> never(64);
      t.recv(1 - r, 99, never.data(), never.size(), [](const status&) {});  // left pending
    }
    return 0;
  });
  CHECK(testing::wait_rank(pids[0], 20s) == 0);
  CHECK(testing::wait_rank(pids[1], 20s) == 0);
}

// While a thread drives the worker inside wait_for, the progress thread parks; operations that
// are still outstanding when that thread leaves must complete anyway: a callback operation (the
// progress thread takes over at once) and a future its owner waits on with plain get() (the
// progress thread takes over after its linger). Rank 0 sends those only after rank 1's wait_for
// has returned, so their events reach a worker nobody waits on. Every payload is checked.
TEST_CASE("operations outstanding when a waiting thread leaves still complete with their data") {
  temp_dir dir;
  const auto pids = testing::spawn_ranks(2, [&](int r) {
    file_address_exchange exchange(dir.path);
    ucx_transport t(r, 2, exchange);
    constexpr int rounds = 6;
    constexpr std::size_t words = 50000;  // 200 KB: rendezvous, like activations
    int bad = 0;
    for (int round = 0; round < rounds; ++round) {
      const bool with_callback = round % 2 == 0;
      std::vector<int> first(words, r == 0 ? round : -1), late(words, r == 0 ? 1000 + round : -1),
          called_back(words, r == 0 ? 2000 + round : -1);
      unsigned char go = 0;
      if (r == 0) {
        auto a = t.send_future(1, 11, first.data(), words * 4);
        t.wait_ok(a);
        auto g = t.recv_future(1, 13, &go, 1);  // rank 1 has left its wait_for
        t.wait_ok(g);
        std::this_thread::sleep_for(20ms);
        auto b = t.send_future(1, 12, late.data(), words * 4);
        std::future<status> c;
        if (with_callback) c = t.send_future(1, 10, called_back.data(), words * 4);
        t.wait_ok(b);
        if (with_callback) t.wait_ok(c);
        continue;
      }
      std::promise<status> callback_done;
      auto callback_future = callback_done.get_future();
      if (with_callback)
        t.recv(0, 10, called_back.data(), words * 4,
               [&callback_done](const status& s) { callback_done.set_value(s); });
      auto a = t.recv_future(0, 11, first.data(), words * 4);
      auto b = t.recv_future(0, 12, late.data(), words * 4);
      t.wait_ok(a);
      auto g = t.send_future(0, 13, &go, 1);
      t.wait_ok(g);
      // Plain waits: nobody drives the worker from this thread any more.
      bad += b.wait_for(10s) == std::future_status::ready && b.get().ok ? 0 : 1;
      if (with_callback)
        bad += callback_future.wait_for(10s) == std::future_status::ready &&
                       callback_future.get().ok
                   ? 0
                   : 1;
      for (int v : first) bad += v != round;
      for (int v : late) bad += v != 1000 + round;
      if (with_callback)
        for (int v : called_back) bad += v != 2000 + round;
    }
    t.shutdown();
    return bad == 0 ? 0 : 1;
  });
  CHECK(testing::wait_rank(pids[0], 60s) == 0);
  CHECK(testing::wait_rank(pids[1], 60s) == 0);
}

// Context parallelism's ring step over UCX: each rank posts the exchange, computes (a busy loop)
// and drives it with test() between slices of that work, as ring attention does between tiles;
// rendezvous-sized blocks, both directions, every payload checked; test() must report each
// exchange done within 10 s of slices, before the wait.
TEST_CASE("a ring exchange over UCX completes while its caller computes and drives it between slices") {
  temp_dir dir;
  const auto pids = testing::spawn_ranks(2, [&](int r) {
    file_address_exchange exchange(dir.path);
    ucx_transport t(r, 2, exchange);
    transport_communicator c(t, {0, 1}, 9);
    constexpr std::size_t words = 65536;  // 256 KiB
    int bad = 0;
    for (int round = 0; round < 20; ++round) {
      std::vector<int> out(words, r * 100000 + round), in(words, -1);
      auto pending = c.start_exchange(std::as_bytes(std::span<const int>(out)), 1 - r,
                                      std::as_writable_bytes(std::span<int>(in)), 1 - r);
      bool done = false;
      for (const auto deadline = std::chrono::steady_clock::now() + 10s; !done && std::chrono::steady_clock::now() < deadline;) {
        const auto slice = std::chrono::steady_clock::now() + 50us;
        while (std::chrono::steady_clock::now() < slice) {
        }
        done = pending->test();
      }
      bad += done ? 0 : 1;
      pending->wait();
      for (int v : in) bad += v != (1 - r) * 100000 + round;
    }
    // After the exchanges, progress() from this thread with nothing in flight does no harm.
    t.progress();
    t.shutdown();
    return bad == 0 ? 0 : 1;
  });
  CHECK(testing::wait_rank(pids[0], 60s) == 0);
  CHECK(testing::wait_rank(pids[1], 60s) == 0);
}

TEST_CASE("a waiting thread polls before it sleeps only when every rank on the host has a core") {
  using std::chrono::microseconds;
  CHECK(wait_spin_policy(4, 8, nullptr).base() == default_wait_spin);
  CHECK(wait_spin_policy(4, 4, nullptr).base() == default_wait_spin);
  CHECK(wait_spin_policy(4, 3, nullptr).base() == microseconds(0));
  CHECK(wait_spin_policy(2, 2, nullptr).base() == default_wait_spin);  // the CI machine: 2 cores
  CHECK(wait_spin_policy(4, 2, nullptr).base() == microseconds(0));    // CI's 4-rank jobs
  CHECK(wait_spin_policy(1, 2, "").base() == default_wait_spin);
  // MACTOR_UCX_SPIN_US wins either way.
  CHECK(wait_spin_policy(4, 2, "150").base() == microseconds(150));
  CHECK(wait_spin_policy(1, 64, "0").base() == microseconds(0));
  // The default adapts to the waits seen; a fixed setting does not.
  CHECK(wait_spin_policy(2, 2, nullptr).adaptive());
  CHECK_FALSE(wait_spin_policy(2, 2, "200").adaptive());
}

TEST_CASE("the poll before a sleep stretches to recent waits up to its cap and no further") {
  using std::chrono::microseconds;
  wait_spin spin(microseconds(200), true);
  CHECK(spin.next() == microseconds(200));  // nothing seen yet
  for (int i = 0; i < 40; ++i) spin.record(microseconds(800));
  CHECK(std::chrono::abs(spin.next() - microseconds(1000)) <= microseconds(1));  // 5/4 of them
  for (int i = 0; i < 40; ++i) spin.record(microseconds(1900));
  CHECK(spin.next() == wait_spin::max_adaptive_spin);  // 5/4 of 1.9 ms, capped
  for (int i = 0; i < 40; ++i) spin.record(microseconds(20'000));
  CHECK(spin.next() == microseconds(200));  // waits for a computing peer: the base poll only
  for (int i = 0; i < 40; ++i) spin.record(microseconds(10));
  CHECK(spin.next() == microseconds(200));  // never below the base
  // A fixed setting, or a base of 0 (shared cores), does not adapt.
  wait_spin fixed(microseconds(150), false), never(microseconds(0), true);
  for (int i = 0; i < 40; ++i) {
    fixed.record(microseconds(800));
    never.record(microseconds(800));
  }
  CHECK(fixed.next() == microseconds(150));
  CHECK(never.next() == microseconds(0));
  CHECK_FALSE(never.adaptive());
}
