// communicator::start_exchange: a send and a receive posted while the caller goes on working,
// driven by its test() calls. On the in-process transport: the ring shift of context parallelism
// on 2 and 3 members, in order with the collectives around it; a short message named at the
// wait; the default (a thread running the all-to-all) for a communicator without its own; and a
// watched communicator that shows the exchange while the caller waits for it.
#include "comm/communicator.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>
#include <string>
#include <thread>

#include "comm/collectives.hpp"
#include "comm/watched_communicator.hpp"
#include "in_process_ranks.hpp"

using namespace mactor::comm;

namespace {

std::vector<int> members_of(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Forwards to a transport communicator but keeps the base class's start_exchange, as a
// communicator without one of its own (NCCL's) does.
class plain_communicator final : public communicator {
 public:
  explicit plain_communicator(communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce(std::span<float> d) override { inner_.all_reduce(d); }
  void all_reduce(std::span<double> d) override { inner_.all_reduce(d); }
  void reduce_scatter(std::span<const float> in, std::span<float> out) override { inner_.reduce_scatter(in, out); }
  void reduce_scatter(std::span<const double> in, std::span<double> out) override { inner_.reduce_scatter(in, out); }
  void all_gather_bytes(std::span<const std::byte> in, std::span<std::byte> out) override { inner_.all_gather_bytes(in, out); }
  void broadcast_bytes(std::span<std::byte> d, int root) override { inner_.broadcast_bytes(d, root); }
  void all_to_all_bytes(std::span<const std::byte> in, std::span<std::byte> out) override { inner_.all_to_all_bytes(in, out); }
  void all_to_all_v_bytes(std::span<const std::byte> in, std::span<const std::size_t> s, std::span<std::byte> out,
                          std::span<const std::size_t> r) override {
    inner_.all_to_all_v_bytes(in, s, out, r);
  }
  void barrier() override { inner_.barrier(); }
  void send_bytes(std::span<const std::byte> d, int peer) override { inner_.send_bytes(d, peer); }
  void recv_bytes(std::span<std::byte> d, int peer) override { inner_.recv_bytes(d, peer); }

 private:
  communicator& inner_;
};

// Member m sends `words` values m * 1000 + i to member m + step and checks what arrives from
// m - step, driving the exchange with test() alone; an all-reduce before and after checks that
// the exchange kept its place among the collectives. "" when all is well.
std::string shift_and_check(communicator& c, int step, std::size_t words, bool drive_with_test) {
  const int n = c.size(), me = c.rank(), to = ((me + step) % n + n) % n, from = ((me - step) % n + n) % n;
  std::vector<float> before{1.0f}, after{2.0f};
  c.all_reduce(std::span<float>(before));
  std::vector<int> out(words), in(words, -1);
  for (std::size_t i = 0; i < words; ++i) out[i] = me * 1000 + static_cast<int>(i % 1000);
  auto pending = c.start_exchange(std::as_bytes(std::span<const int>(out)), to, std::as_writable_bytes(std::span<int>(in)),
                                  from);
  if (drive_with_test) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!pending->test())
      if (std::chrono::steady_clock::now() > deadline) return "test() never reported the exchange done";
  }
  pending->wait();
  c.all_reduce(std::span<float>(after));
  for (std::size_t i = 0; i < words; ++i)
    if (in[i] != from * 1000 + static_cast<int>(i % 1000))
      return "element " + std::to_string(i) + " is " + std::to_string(in[i]) + ", not member " + std::to_string(from) + "'s";
  if (before[0] != float(n) || after[0] != 2.0f * float(n)) return "the all-reduces around the exchange went wrong";
  return {};
}

}  // namespace

TEST_CASE("an exchange driven by test() alone shifts a ring of 2 and 3 members both ways") {
  for (int world : {2, 3})
    for (int step : {1, -1})
      for (std::size_t words : {std::size_t{1}, std::size_t{70000}}) {
        INFO("world " << world << ", step " << step << ", " << words << " words");
        const auto failures = testing::run_on_ranks(world, [&](int, transport& t) {
          transport_communicator c(t, members_of(world), 3);
          return shift_and_check(c, step, words, true);
        });
        for (const auto& f : failures) FAIL_CHECK(f);
        CHECK(failures.empty());
      }
}

TEST_CASE("the default exchange, on a thread of its own, and a watched one shift the ring as the transport's does") {
  for (bool with_test : {true, false}) {
    INFO((with_test ? "driven by test()" : "waited for at once"));
    const auto failures = testing::run_on_ranks(3, [&](int r, transport& t) {
      transport_communicator c(t, members_of(3), 4);
      plain_communicator plain(c);
      std::string failure = shift_and_check(plain, 1, 5000, with_test);
      watched_communicator watched(std::make_unique<transport_communicator>(t, members_of(3), 5), "context-parallel",
                                   members_of(3), r);
      if (failure.empty()) failure = shift_and_check(watched, -1, 5000, with_test);
      return failure;
    });
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(failures.empty());
  }
}

TEST_CASE("a watched communicator shows an exchange while its caller waits for it, not before") {
  const auto failures = testing::run_on_ranks(2, [](int r, transport& t) -> std::string {
    watched_communicator c(std::make_unique<transport_communicator>(t, members_of(2), 6), "context-parallel",
                           members_of(2), r);
    std::vector<std::byte> out(64), in(64);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // member 0 waits meanwhile
    auto pending = c.start_exchange(out, 1 - r, in, 1 - r);
    if (r == 0) {
      if (c.current()) return "the exchange shows as a call before anyone waits for it";
      std::string seen;
      std::thread watcher([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (const auto call = c.current()) seen = call->what;
      });
      pending->wait();
      watcher.join();
      if (seen != "context-parallel exchange of 64 B with rank 1") return "while waiting the watch showed '" + seen + "'";
      return {};
    }
    pending->wait();
    return {};
  });
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}

TEST_CASE("an exchange whose peer sends a different size fails at the wait naming that member") {
  const auto failures = testing::run_on_ranks(2, [](int r, transport& t) -> std::string {
    transport_communicator c(t, members_of(2), 7);
    std::vector<std::byte> out(r == 0 ? 12 : 20), in(20);
    auto pending = c.start_exchange(out, 1 - r, in, 1 - r);
    try {
      pending->wait();
    } catch (const comm_error& e) {
      if (r == 1 && std::string(e.what()).find("rank 0 sent 12 bytes where 20 were expected") != std::string::npos)
        return {};
      return std::string("unexpected failure: ") + e.what();
    }
    return r == 1 ? "member 1 took a short message without an error" : "";
  });
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}
