// The UCX transport connecting through the rendezvous store instead of files.
#include "comm/store_address_exchange.hpp"

#include <catch2/catch.hpp>

#include "comm/collectives.hpp"
#include "comm/rendezvous_server.hpp"
#include "comm/ucx_transport.hpp"
#include "multi_process.hpp"

using namespace mactor::comm;
using namespace std::chrono_literals;

TEST_CASE("addresses round-trip through the rendezvous store and a missing rank is named") {
  rendezvous_server server;
  rendezvous_client client({"127.0.0.1", server.port()});
  store_address_exchange ex(client);
  const std::vector<std::byte> address{std::byte{0}, std::byte{1}, std::byte{0}, std::byte{200}};
  ex.publish(2, address);
  CHECK(ex.fetch(2, 1s) == address);
  try {
    ex.fetch(3, 50ms);
    FAIL("fetch returned for a rank that never published");
  } catch (const comm_error& e) {
    CHECK(e.rank() == 3);
    CHECK_THAT(e.what(), Catch::Contains("rank 3 did not publish"));
  }
}

TEST_CASE("two processes connect UCX through the rendezvous store and all-reduce") {
  rendezvous_server server;  // lives in the parent; the children connect over TCP
  const int port = server.port();
  const auto pids = testing::spawn_ranks(2, [port](int r) {
    rendezvous_client client({"127.0.0.1", port});
    store_address_exchange ex(client);
    ucx_transport t(r, 2, ex);
    transport_communicator c(t, {0, 1}, 1);
    std::vector<float> x(1001, static_cast<float>(r + 1));
    c.all_reduce(std::span<float>(x));
    t.shutdown();
    for (float v : x)
      if (v != 3.0f) return 1;
    return 0;
  });
  CHECK(testing::wait_rank(pids[0], 30s) == 0);
  CHECK(testing::wait_rank(pids[1], 30s) == 0);
}
