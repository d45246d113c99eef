// Embedding lookup and scatter-add backward, including ids outside this vocabulary shard.
#include "kernels/embedding.hpp"

#include <catch2/catch.hpp>

#include "tests/kernels/gradient_check.hpp"

using namespace mactor;

TEST_CASE("embedding backward matches finite differences with repeated and foreign ids") {
  const int vocab_start = 4, vocab_end = 9, hidden = 3;
  const std::vector<std::int32_t> ids = {4, 8, 2, 4, 11, 6, 4};
  const int n = int(ids.size());
  auto table = test::random_vector((vocab_end - vocab_start) * hidden, 1);
  const auto probe = test::random_vector(n * hidden, 2);
  auto loss = [&] {
    std::vector<double> out(n * hidden);
    kernels::embedding_forward<double>(out.data(), table.data(), ids.data(), n, hidden,
                                       vocab_start, vocab_end);
    return test::dot(probe, out);
  };
  std::vector<double> dtable(table.size(), 0.0);
  kernels::embedding_backward<double>(dtable.data(), probe.data(), ids.data(), n, hidden,
                                      vocab_start, vocab_end);
  CHECK(test::relative_error(dtable, test::numeric_gradient(loss, table)) < 1e-8);
}

TEST_CASE("embedding rows outside the shard are zero and beta accumulates") {
  const std::vector<std::int32_t> ids = {0, 1, 2};
  const std::vector<double> table = {10, 20};  // shard [1, 3), hidden 1
  std::vector<double> out = {1, 1, 1};
  kernels::embedding_forward<double>(out.data(), table.data(), ids.data(), 3, 1, 1, 3, 1.0);
  CHECK(out == std::vector<double>{1, 11, 21});
}
