// Ring collectives on the in-process transport, against a naive reference, for odd sizes and
// several group shapes, including disjoint and overlapping subgroups running at once.
#include "comm/collectives.hpp"

#include <catch2/catch.hpp>

#include "collective_reference.hpp"
#include "comm/local_transport.hpp"
#include "in_process_ranks.hpp"

using namespace mactor::comm;

namespace {

std::vector<int> iota_ranks(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

TEST_CASE("collectives match the naive reference on 1, 2, 3 and 4 in-process ranks") {
  for (int world : {1, 2, 3, 4}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000003}}) {
      if (count == 1000003 && world == 1) continue;
      INFO("world " << world << ", " << count << " elements");
      const auto failures = testing::run_on_ranks(world, [&](int, transport& t) {
        transport_communicator c(t, iota_ranks(world), 1);
        return testing::exercise_collectives(c, count);
      });
      CHECK(failures.empty());
      for (const auto& f : failures) FAIL_CHECK(f);
    }
  }
}

TEST_CASE("subgroups of one world run their collectives concurrently without mixing messages") {
  // World 6: groups {0,2,4} and {1,3,5} (stride), then {0,1},{2,3},{4,5}, then a reversed
  // order group {5,4,3,2,1,0}; all share ranks across kinds, told apart by their ids.
  const auto failures = testing::run_on_ranks(6, [](int r, transport& t) -> std::string {
    std::vector<int> stride = r % 2 == 0 ? std::vector<int>{0, 2, 4} : std::vector<int>{1, 3, 5};
    std::vector<int> pair{r - r % 2, r - r % 2 + 1};
    transport_communicator a(t, stride, 10 + r % 2);
    transport_communicator b(t, pair, 20 + r / 2);
    transport_communicator all(t, {5, 4, 3, 2, 1, 0}, 30);
    for (auto* c : {&a, &b, &all})
      for (std::size_t count : {1, 7, 1001})
        if (auto f = testing::exercise_collectives(*c, count); !f.empty()) return f;
    return {};
  });
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}

TEST_CASE("a failed in-process rank turns a pending all-reduce into an error naming it") {
  local_fabric fabric(3);
  std::vector<std::string> errors(2);
  std::vector<int> culprits(2, -2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto t = fabric.connect(r);
      transport_communicator c(*t, {0, 1, 2}, 1);
      std::vector<float> x(1000, 1.0f);
      try {
        c.all_reduce(std::span<float>(x));
      } catch (const comm_error& e) {
        errors[r] = e.what();
        culprits[r] = e.rank();
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  fabric.fail_rank(2);
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    CHECK(culprits[r] == 2);
    CHECK_THAT(errors[r], Catch::Contains("rank 2"));
  }
}

TEST_CASE("reduce_scatter refuses an input that is not group-size blocks") {
  local_fabric fabric(1);
  auto t = fabric.connect(0);
  transport_communicator c(*t, {0}, 1);
  std::vector<float> in(5), out(2);
  CHECK_THROWS_WITH(c.reduce_scatter(std::span<const float>(in), std::span<float>(out)),
                    Catch::Contains("group size x output size"));
}

TEST_CASE("a member that never joins the collective is named after the group's timeout") {
  local_fabric fabric(2);
  auto t = fabric.connect(0);
  auto silent = fabric.connect(1);
  transport_communicator c(*t, {0, 1}, 1, std::chrono::milliseconds(200));
  std::vector<float> x(64, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  try {
    c.all_reduce(std::span<float>(x));
    FAIL("all_reduce returned although rank 1 never joined");
  } catch (const comm_error& e) {
    CHECK(e.rank() == 1);
    CHECK_THAT(e.what(), Catch::Contains("rank 1") && Catch::Contains("200 ms"));
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("collectives on tensors equal the typed collectives, and refuse a dtype the group cannot reduce") {
  const auto failures = testing::run_on_ranks(3, [&](int rank, transport& t) -> std::string {
    transport_communicator c(t, iota_ranks(3), 1);
    communicator& group = c;
    namespace tn = mactor::tensor;
    tn::tensor x({5}, tn::dtype::float64, tn::memory_kind::communication);
    std::vector<double> y(5);
    for (int i = 0; i < 5; ++i) x.host<double>()[i] = y[i] = rank * 10.0 + i;
    group.all_reduce(x.view());
    group.all_reduce(std::span<double>(y));
    for (int i = 0; i < 5; ++i)
      if (x.host<double>()[i] != y[i]) return "all-reduce element " + std::to_string(i);
    tn::tensor in({6}, tn::dtype::float32, tn::memory_kind::communication), out({2}, tn::dtype::float32, tn::memory_kind::communication);
    for (int i = 0; i < 6; ++i) in.host<float>()[i] = static_cast<float>(i + rank);
    group.reduce_scatter(in.view(), out.view());
    // Block `rank` of every member's input, summed: (2 rank + j) + (2 rank + j + 1) + (2 rank + j + 2).
    for (int j = 0; j < 2; ++j)
      if (out.host<float>()[j] != 3.0f * (2 * rank + j) + 3.0f) return "reduce-scatter element " + std::to_string(j);
    tn::tensor gathered({6}, tn::dtype::float32, tn::memory_kind::communication);
    group.all_gather(out.view(), gathered.view());
    for (int j = 0; j < 6; ++j)
      if (gathered.host<float>()[j] != 3.0f * j + 3.0f) return "all-gather element " + std::to_string(j);
    tn::tensor half({4}, tn::dtype::bfloat16, tn::memory_kind::communication);
    try {
      group.all_reduce(half.view());
      return "a bf16 all-reduce ran";
    } catch (const tn::tensor_error& e) {
      if (std::string(e.what()) != "all-reduce of a bf16 tensor: the group reduces fp32 and fp64") return e.what();
    }
    return "";
  });
  CHECK(failures.empty());
  for (const auto& f : failures) FAIL_CHECK(f);
}

TEST_CASE("all_to_all_v with counts that disagree between sender and receiver is an error naming the member") {
  const auto failures = testing::run_on_ranks(2, [](int r, transport& t) -> std::string {
    transport_communicator c(t, {0, 1}, 40);
    // Member 0 sends 3 elements to member 1, which expects 5.
    const std::vector<std::size_t> send = r == 0 ? std::vector<std::size_t>{1, 3} : std::vector<std::size_t>{5, 1};
    const std::vector<std::size_t> recv = r == 0 ? std::vector<std::size_t>{1, 5} : std::vector<std::size_t>{5, 1};
    std::vector<float> in(8, float(r)), out(8);
    try {
      c.all_to_all_v(std::span<const float>(in), std::span<const std::size_t>(send), std::span<float>(out),
                     std::span<const std::size_t>(recv));
    } catch (const comm_error& e) {
      if (r == 1 && std::string(e.what()).find("rank 0 sent 12 bytes where 20 were expected") == std::string::npos)
        return std::string("unexpected message: ") + e.what();
      return {};
    }
    return r == 1 ? "member 1 received a short block without an error" : "";
  });
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}
