// The rendezvous store: opaque bytes, blocking get with timeout, barrier and all-gather across
// threads standing in for ranks, and a timeout that names the rank that never came.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "comm/rendezvous.hpp"

using namespace mactor::comm;
using namespace std::chrono_literals;

namespace {
host_port local(const rendezvous_server& s) { return {"127.0.0.1", s.port()}; }
}  // namespace

TEST_CASE("values are opaque bytes, including zeros") {
  rendezvous_server server;
  rendezvous_client c(local(server));
  std::string bytes("\0\x01\xff ucx-address", 16);
  c.set("ucx/0", bytes);
  CHECK(c.get("ucx/0", 100ms) == bytes);
  CHECK(server.try_get("ucx/0") == bytes);
}

TEST_CASE("get blocks until another client sets the key") {
  rendezvous_server server;
  rendezvous_client waiter(local(server)), setter(local(server));
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    setter.set("late", "here");
  });
  auto t0 = std::chrono::steady_clock::now();
  CHECK(waiter.get("late", 5s) == "here");
  CHECK(std::chrono::steady_clock::now() - t0 >= 40ms);
  t.join();
}

TEST_CASE("get of a key nobody sets fails after the timeout, naming the key") {
  rendezvous_server server;
  rendezvous_client c(local(server));
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(c.get("caf/3", 200ms), Catch::Contains("'caf/3' was not set within 200 ms"));
  auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited >= 190ms);
  CHECK(waited < 2s);
}

TEST_CASE("add counts atomically across clients") {
  rendezvous_server server;
  std::vector<std::thread> ts;
  for (int k = 0; k < 4; ++k)
    ts.emplace_back([&] {
      rendezvous_client c(local(server));
      for (int i = 0; i < 25; ++i) c.add("n", 1);
    });
  for (auto& t : ts) t.join();
  rendezvous_client c(local(server));
  CHECK(c.add("n", 0) == 100);
  c.set("bytes", "abc");
  CHECK_THROWS_WITH(c.add("bytes", 1), Catch::Contains("not a counter"));
}

TEST_CASE("all_gather returns every rank's bytes in rank order, twice in a row") {
  rendezvous_server server;
  const int n = 5;
  std::vector<std::vector<std::string>> got(n), again(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      rendezvous_client c(local(server));
      got[r] = c.all_gather("addr", r, n, "node" + std::to_string(r), 5s);
      c.barrier("mid", r, n, 5s);
      again[r] = c.all_gather("addr", r, n, "second" + std::to_string(r), 5s);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    CHECK(got[r] == std::vector<std::string>{"node0", "node1", "node2", "node3", "node4"});
    CHECK(again[r][4] == "second4");
  }
}

TEST_CASE("a barrier missing a rank fails on every other rank, naming it") {
  rendezvous_server server;
  std::atomic<int> named{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)  // rank 3 of 4 never comes
    ts.emplace_back([&, r] {
      rendezvous_client c(local(server));
      try {
        c.barrier("start", r, 4, 300ms);
      } catch (const rendezvous_error& e) {
        if (std::string(e.what()).find("rank 3 never arrived") != std::string::npos) ++named;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(named == 3);
}

TEST_CASE("a client retries until the store starts, and reports an address that never answers") {
  int port = 0;
  ::close(listen_tcp(port));  // a port that was free a moment ago
  std::unique_ptr<rendezvous_server> server;
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    server = std::make_unique<rendezvous_server>(port);
  });
  rendezvous_client c({"127.0.0.1", port}, 5s);
  t.join();
  c.set("k", "v");
  CHECK(server->try_get("k") == "v");
  server.reset();
  CHECK_THROWS_WITH(rendezvous_client({"127.0.0.1", port}, 100ms),
                    Catch::Contains("cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(port)));
}

TEST_CASE("a client sees the store go away instead of hanging") {
  auto server = std::make_unique<rendezvous_server>();
  rendezvous_client c(local(*server));
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    server->stop();
  });
  CHECK_THROWS_WITH(c.get("never", 10s), Catch::Contains("lost the connection"));
  t.join();
}

TEST_CASE("the store's address follows mactor, then MASTER_ADDR/PORT+1, then one node's job id") {
  launch_env e;
  e.rdzv_addr = "10.0.0.1:4000";
  auto ep = resolve_rendezvous(e);
  CHECK(ep.addr.str() == "10.0.0.1:4000");
  CHECK_FALSE(ep.host_here);
  e = {};
  e.world_size = 4;
  e.local_world_size = 2;
  e.master_addr = "node0";
  e.master_port = 29500;
  ep = resolve_rendezvous(e);
  CHECK(ep.addr.str() == "node0:29501");
  CHECK(ep.host_here);
  e.rank = 1;
  CHECK_FALSE(resolve_rendezvous(e).host_here);
  e.master_addr.clear();
  CHECK_THROWS_WITH(resolve_rendezvous(e), Catch::Contains("set MASTER_ADDR"));
  e.local_world_size = 4;
  e.job_id = "77";
  CHECK(resolve_rendezvous(e).addr.host == "127.0.0.1");
}

TEST_CASE("open_rendezvous joins ranks started with only MASTER_ADDR and MASTER_PORT") {
  int port = 0;
  ::close(listen_tcp(port));
  std::vector<std::string> got(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      launch_env e;
      e.rank = r;
      e.world_size = e.local_world_size = 3;
      e.master_addr = "127.0.0.1";
      e.master_port = port - 1;
      auto rdzv = open_rendezvous(e, 5s);
      got[r] = rdzv.client->all_gather("x", r, 3, std::to_string(r * r), 5s)[2];
      rdzv.client->barrier("end", r, 3, 5s);  // rank 0 hosts: keep it until all are done
    });
  for (auto& t : ts) t.join();
  CHECK(got == std::vector<std::string>{"4", "4", "4"});
}
