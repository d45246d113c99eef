// The host memory ledger.
#include "tensor/memory_ledger.hpp"

#include <cstdio>

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
  const auto held = total_.current.fetch_add(bytes, std::memory_order_relaxed);
  if (const auto limit = this->limit(); limit > 0 && bytes > 0 && held + bytes > limit) {
    total_.current.fetch_sub(bytes, std::memory_order_relaxed);
    refuse(k, bytes, held);
  }
  raise_peak(total_, held + bytes);
  auto& c = kinds_[static_cast<int>(k)];
  raise_peak(c, c.current.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void memory_ledger::set_limit(std::int64_t bytes, std::string source) {
  limit_source_ = std::move(source);
  limit_.store(bytes, std::memory_order_relaxed);
}

void memory_ledger::refuse(memory_kind k, std::int64_t bytes, std::int64_t held) const {
  std::string by_kind;
  for (int i = 0; i < num_memory_kinds; ++i) {
    const auto now = kinds_[std::size_t(i)].current.load(std::memory_order_relaxed);
    if (now == 0) continue;
    by_kind += (by_kind.empty() ? "" : ", ") + std::string(name(memory_kind(i))) + " " + mebibytes(now);
  }
  throw out_of_memory("out of device memory: tried to allocate " + mebibytes(bytes) + " of " + std::string(name(k)) +
                      " with " + mebibytes(held) + " of " + mebibytes(limit()) + " (" + limit_source_ + ") held" +
                      (by_kind.empty() ? "" : ": " + by_kind) +
                      ". Shard the model further (--use-megatron-fsdp with --data-parallel-sharding-strategy "
                      "optim_grads_params, --init-model-with-meta-device, tensor or pipeline parallelism, "
                      "recomputation, a smaller micro-batch) or give the ranks more memory");
}

void counted_bytes::set(std::int64_t bytes) {
  if (bytes > bytes_) memory_ledger::host().allocated(kind_, bytes - bytes_);
  else if (bytes < bytes_) memory_ledger::host().freed(kind_, bytes_ - bytes);
  bytes_ = bytes;
}

std::string mebibytes(std::int64_t bytes) {
  char out[48];
  std::snprintf(out, sizeof out, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return out;
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
