// The memory ledger counts every tensor's bytes under its kind, with peaks.
#include "tensor/memory_ledger.hpp"

#include <catch2/catch.hpp>

#include "tensor/tensor.hpp"

using namespace mactor::tensor;

TEST_CASE("the host ledger counts tensors by kind while they live, and keeps the peak") {
  auto& ledger = memory_ledger::host();
  const auto activations = ledger.usage(memory_kind::activations).current;
  const auto grads = ledger.usage(memory_kind::gradients).current;
  ledger.reset_peaks();
  {
    tensor a({1000}, dtype::float32, memory_kind::activations);
    tensor g({10}, dtype::float64, memory_kind::gradients);
    CHECK(ledger.usage(memory_kind::activations).current == activations + 4000);
    CHECK(ledger.usage(memory_kind::gradients).current == grads + 80);
    tensor moved = std::move(a);  // a move does not count twice
    CHECK(ledger.usage(memory_kind::activations).current == activations + 4000);
  }
  CHECK(ledger.usage(memory_kind::activations).current == activations);
  CHECK(ledger.usage(memory_kind::activations).peak == activations + 4000);
  CHECK(ledger.total().peak >= 4080);
  ledger.reset_peaks();
  CHECK(ledger.usage(memory_kind::activations).peak == activations);
  CHECK(name(memory_kind::optimizer_state) == "optimizer state");
}
