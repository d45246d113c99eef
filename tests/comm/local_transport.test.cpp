// The in-process transport: matching order, size errors, failed ranks.
#include "comm/local_transport.hpp"

#include <catch2/catch.hpp>
#include <thread>

using namespace mactor::comm;

TEST_CASE("in-process messages with one tag match in posting order across threads") {
  local_fabric fabric(2);
  auto a = fabric.connect(0);
  auto b = fabric.connect(1);
  std::vector<int> got(100, -1);
  std::thread receiver([&] {
    std::vector<std::future<status>> fs;
    for (int i = 0; i < 100; ++i) fs.push_back(b->recv_future(0, 3, &got[i], sizeof(int)));
    for (auto& f : fs) CHECK(f.get().ok);
  });
  std::vector<int> values(100);
  std::vector<std::future<status>> sends;
  for (int i = 0; i < 100; ++i) {
    values[i] = i;
    sends.push_back(a->send_future(1, 3, &values[i], sizeof(int)));
  }
  for (auto& f : sends) CHECK(f.get().ok);
  receiver.join();
  for (int i = 0; i < 100; ++i) CHECK(got[i] == i);
}

TEST_CASE("a receive smaller than the message reports both sizes") {
  local_fabric fabric(2);
  auto a = fabric.connect(0);
  auto b = fabric.connect(1);
  std::vector<char> big(100), small(10);
  auto r = b->recv_future(0, 5, small.data(), small.size());
  auto s = a->send_future(1, 5, big.data(), big.size());
  const status got = r.get();
  CHECK_FALSE(got.ok);
  CHECK_THAT(got.message, Catch::Contains("100 bytes") && Catch::Contains("holds 10"));
  CHECK_FALSE(s.get().ok);
}

TEST_CASE("an owned send keeps its bytes alive until delivery") {
  local_fabric fabric(2);
  auto a = fabric.connect(0);
  auto b = fabric.connect(1);
  a->send_owned(1, 4, std::vector<std::byte>(1000, std::byte{7}));  // buffer handed over
  std::vector<std::byte> in(1000);
  auto r = b->recv_future(0, 4, in.data(), in.size());
  CHECK(r.get().bytes == 1000);
  CHECK(in == std::vector<std::byte>(1000, std::byte{7}));
}

TEST_CASE("a tag beyond the transport's 40 bits is refused") {
  local_fabric fabric(1);
  auto t = fabric.connect(0);
  char c = 0;
  CHECK_THROWS_WITH(t->send(0, max_tag + 5, &c, 1, {}), Catch::Contains("40 bits"));
}
