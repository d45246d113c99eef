// Microbatch counts and the batch-size ramp-up, against values worked out by hand from Megatron's formulas.
#include <catch2/catch.hpp>

#include "config/microbatches.hpp"

using namespace mactor::config;

TEST_CASE("a constant global batch splits into gbs / (mbs * dp) microbatches") {
  microbatch_plan p{2, 4, 64, std::nullopt, false};
  CHECK(p.num_microbatches(0) == 8);
  CHECK(p.num_microbatches(1000000) == 8);
}

TEST_CASE("ramp-up grows the batch by the increment every samples/steps samples") {
  // start 16, increment 16, 300 samples, gbs 64: 3 steps of 100 samples each.
  microbatch_plan p{1, 2, 64, batch_rampup{16, 16, 300}, false};
  CHECK(p.current_global_batch_size(0) == 16);
  CHECK(p.current_global_batch_size(99) == 16);
  CHECK(p.current_global_batch_size(100) == 32);
  CHECK(p.current_global_batch_size(299) == 48);
  CHECK(p.current_global_batch_size(300) == 64);
  CHECK(p.current_global_batch_size(301) == 64);
  CHECK(p.num_microbatches(150) == 16);
}

TEST_CASE("sample-based training length counts the ramp iterations") {
  microbatch_plan p{1, 1, 64, batch_rampup{16, 16, 300}, false};
  // By hand: 7 iterations of 16 (to 112), 3 of 32 (to 208), 2 of 48 (to 304), then (1000-304)//64 = 10.
  CHECK(p.train_iters_for_samples(1000) == 22);
  CHECK(microbatch_plan{1, 1, 64, std::nullopt, false}.train_iters_for_samples(1000) == 15);
}

TEST_CASE("decrease-batch-size-if-needed rounds the running batch down") {
  microbatch_plan p{3, 1, 64, batch_rampup{16, 16, 300}, true};
  CHECK(p.running_global_batch_size(0) == 15);
  CHECK(p.num_microbatches(0) == 5);
}
