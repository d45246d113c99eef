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

TEST_CASE("past the device memory an allocation fails naming what it asked for and what is held against the limit") {
  auto& ledger = memory_ledger::host();
  const auto held = ledger.total().current;
  ledger.set_limit(held + 4096, "MACTOR_DEVICE_MEMORY=test");
  {
    tensor a({512}, dtype::float32, memory_kind::activations);  // 2048 bytes: fits
    try {
      tensor b({1024}, dtype::float32, memory_kind::gradients);  // 4096 more: does not
      FAIL("no out_of_memory");
    } catch (const out_of_memory& e) {
      const std::string what = e.what();
      CHECK(what.find("tried to allocate 0.00 MiB of gradients") != std::string::npos);
      CHECK(what.find("(MACTOR_DEVICE_MEMORY=test) held") != std::string::npos);
      CHECK(what.find("activations") != std::string::npos);
      CHECK(what.find("--init-model-with-meta-device") != std::string::npos);
    }
    // Nothing of the refused tensor was counted.
    CHECK(ledger.total().current == held + 2048);
    // Bytes outside tensors count against the same limit.
    counted_bytes state(memory_kind::optimizer_state);
    state.set(1024);
    CHECK(ledger.usage(memory_kind::optimizer_state).current >= 1024);
    CHECK_THROWS_AS(state.set(4096), out_of_memory);
    CHECK(state.bytes() == 1024);
    counted_bytes copy = state;  // a copy holds its own bytes
    CHECK(ledger.total().current == held + 2048 + 2048);
  }
  CHECK(ledger.total().current == held);
  ledger.set_limit(0, "");
  tensor big({1 << 20}, dtype::float32, memory_kind::other);  // no limit any more
  CHECK(ledger.total().current == held + (4 << 20));
}
