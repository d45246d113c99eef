// Tests for data/dataset_request: --data-path lists and per-split sample counts (hand-computed
// from data_format.md §2.5 and §3).
#include "data/dataset_request.hpp"

#include <catch2/catch.hpp>

#include "data/data_error.hpp"

using namespace mactor::data;

TEST_CASE("data-path lists become prefixes with or without weights as Megatron reads them") {
  auto b = blend_from_list({"30", " a ", "70", "b"});
  CHECK(b.prefixes == std::vector<std::string>{"a", "b"});
  CHECK(b.weights == std::vector<double>{30.0, 70.0});
  b = blend_from_list({"a"});
  CHECK(b.prefixes == std::vector<std::string>{"a"});
  CHECK(b.weights.empty());
  b = blend_from_list({"a", "b"});
  CHECK(b.prefixes == std::vector<std::string>{"a", "b"});
  CHECK(b.weights.empty());
  b = blend_from_list({"0.5", "a", "b", "c"});  // a weight, then a non-number: all prefixes
  CHECK(b.prefixes.size() == 4);
  CHECK(b.weights.empty());
  CHECK_THROWS_AS(blend_from_list({"a", "b", "1", "c"}), data_error);
}

TEST_CASE("sample counts per split follow train iterations, eval interval and eval iterations") {
  sample_count_args a;
  a.train_iters = 1000;
  a.global_batch_size = 8;
  a.eval_interval = 100;
  a.eval_iters = 10;
  auto n = train_valid_test_num_samples(a);
  CHECK(n[0] == 8000);
  CHECK(n[1] == (1000 / 100 + 1) * 10 * 8);
  CHECK(n[2] == 80);
  a.train_samples = 12345;
  a.full_validation = true;
  n = train_valid_test_num_samples(a);
  CHECK(n[0] == 12345);
  CHECK_FALSE(n[1].has_value());
}
