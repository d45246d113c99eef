// watched_communicator: the call in progress (group, operation, size, the members it waits
// with, training or background thread) while a member is missing, and nothing once it is done.
#include "comm/watched_communicator.hpp"

#include <catch2/catch.hpp>
#include <atomic>
#include <future>
#include <thread>

#include "comm/collectives.hpp"
#include "comm/local_transport.hpp"

using namespace mactor::comm;
using namespace std::chrono_literals;

namespace {

// Polls `c` until it reports a call (or 10 s pass).
std::optional<watched_communicator::call> wait_for_call(const watched_communicator& c) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto call = c.current()) return call;
    std::this_thread::sleep_for(1ms);
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a watched communicator names the collective it is in and the members it waits with") {
  for (const bool background : {false, true}) {
    INFO((background ? "background thread" : "training thread"));
    local_fabric fabric(3);
    std::vector<std::unique_ptr<transport>> ts;
    for (int r = 0; r < 3; ++r) ts.push_back(fabric.connect(r));
    const std::vector<int> members{0, 2, 4};  // global ranks: positions 0, 1, 2 on the fabric
    std::vector<std::unique_ptr<watched_communicator>> cs;
    for (int r = 0; r < 3; ++r)
      cs.push_back(std::make_unique<watched_communicator>(
          std::make_unique<transport_communicator>(*ts[r], std::vector<int>{0, 1, 2}, 5), "data-parallel", members,
          members[r]));
    CHECK_FALSE(cs[0]->current());
    std::promise<void> third_may_go;
    std::vector<std::thread> threads;
    std::vector<std::vector<float>> data(3, std::vector<float>(10));
    for (int r = 0; r < 3; ++r) {
      for (int i = 0; i < 10; ++i) data[r][i] = static_cast<float>(r + i);
      threads.emplace_back([&, r, go = r == 2 ? third_may_go.get_future() : std::future<void>{}]() mutable {
        if (background) mark_background_thread();
        if (go.valid()) go.wait();
        cs[r]->all_reduce(std::span<float>(data[r]));
      });
    }
    // Ranks 0 and 2 are in the all-reduce; rank 4 has not come.
    const auto call = wait_for_call(*cs[0]);
    REQUIRE(call);
    CHECK(call->what == "data-parallel all-reduce of 40 B with ranks 2, 4");
    CHECK(call->background == background);
    CHECK(wait_for_call(*cs[1]));
    CHECK_FALSE(cs[2]->current());
    third_may_go.set_value();
    for (auto& t : threads) t.join();
    for (int r = 0; r < 3; ++r) {
      CHECK_FALSE(cs[r]->current());
      for (int i = 0; i < 10; ++i) CHECK(data[r][i] == static_cast<float>(3 * i + 3));
    }
  }
}

TEST_CASE("a watched point-to-point call names its one peer, and sizes read as B, KiB and MiB") {
  local_fabric fabric(2);
  auto t0 = fabric.connect(0), t1 = fabric.connect(1);
  watched_communicator c0(std::make_unique<transport_communicator>(*t0, std::vector<int>{0, 1}, 6), "embedding",
                          {3, 7}, 3);
  watched_communicator c1(std::make_unique<transport_communicator>(*t1, std::vector<int>{0, 1}, 6), "embedding",
                          {3, 7}, 7);
  std::vector<float> in(3000), out(3000, 1.0f);
  std::thread receiver([&] { c0.recv(std::span<float>(in), 1); });
  const auto call = wait_for_call(c0);
  REQUIRE(call);
  CHECK(call->what == "embedding receive of 11.7 KiB with rank 7");
  c1.send(std::span<const float>(out), 0);
  receiver.join();
  CHECK(in[2999] == 1.0f);
  CHECK_FALSE(c0.current());
  CHECK(format_size(1023) == "1023 B");
  CHECK(format_size(3 * 1024 * 1024 / 2) == "1.5 MiB");
}

TEST_CASE("a labelled call says what it is for and names its peer by global rank") {
  local_fabric fabric(2);
  auto t0 = fabric.connect(0), t1 = fabric.connect(1);
  watched_communicator c0(std::make_unique<transport_communicator>(*t0, std::vector<int>{0, 1}, 6), "context-parallel",
                          {4, 5}, 4);
  watched_communicator c1(std::make_unique<transport_communicator>(*t1, std::vector<int>{0, 1}, 6), "context-parallel",
                          {4, 5}, 5);
  std::vector<float> in(16), out(16, 2.0f);
  std::thread receiver([&] {
    const call_label outer("never shown: the inner label holds", 0);
    const call_label label("KV block 2 of 3 from {peer} in ring attention", 1);
    c0.recv(std::span<float>(in), 1);
  });
  const auto call = wait_for_call(c0);
  REQUIRE(call);
  CHECK(call->what == "KV block 2 of 3 from rank 5 in ring attention");
  c1.send(std::span<const float>(out), 0);
  receiver.join();
  // The label goes with its scope: this thread's calls read as before.
  std::thread plain([&] { c0.recv(std::span<float>(in), 1); });
  const auto bare = wait_for_call(c0);
  REQUIRE(bare);
  CHECK(bare->what == "context-parallel receive of 64 B with rank 5");
  c1.send(std::span<const float>(out), 0);
  plain.join();
}
