// The host memory ledger.
#include "tensor/memory_ledger.hpp"

namespace mactor::tensor {

std::string_view name(memory_kind k) {
  switch (k) {
    case memory_kind::parameters: return "parameters";
    case memory_kind::gradients: return "gradients";
    case memory_kind::optimizer_state: return "optimizer state";
    case memory_kind::activations: return "activations";
    case memory_kind::communication: return "communication";
    case memory_kind::other: return "other";
  }
  return "?";
}

memory_ledger& memory_ledger::host() {
  static memory_ledger ledger;
  return ledger;
}

void memory_ledger::raise_peak(counter& c, std::int64_t now) {
  std::int64_t peak = c.peak.load(std::memory_order_relaxed);
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void memory_ledger::allocated(memory_kind k, std::int64_t bytes) {
  auto& c = kinds_[static_cast<int>(k)];
  raise_peak(c, c.current.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(total_, total_.current.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void memory_ledger::freed(memory_kind k, std::int64_t bytes) {
  kinds_[static_cast<int>(k)].current.fetch_sub(bytes, std::memory_order_relaxed);
  total_.current.fetch_sub(bytes, std::memory_order_relaxed);
}

memory_usage memory_ledger::usage(memory_kind k) const {
  const auto& c = kinds_[static_cast<int>(k)];
  return {c.current.load(std::memory_order_relaxed), c.peak.load(std::memory_order_relaxed)};
}

memory_usage memory_ledger::total() const {
  return {total_.current.load(std::memory_order_relaxed), total_.peak.load(std::memory_order_relaxed)};
}

void memory_ledger::reset_peaks() {
  for (auto& c : kinds_) c.peak.store(c.current.load(std::memory_order_relaxed), std::memory_order_relaxed);
  total_.peak.store(total_.current.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace mactor::tensor
