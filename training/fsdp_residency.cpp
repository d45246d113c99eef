// A chunk's whole parameters and gradients held only around its compute (see fsdp_residency.hpp).
#include "training/fsdp_residency.hpp"

#include <stdexcept>

namespace mactor::training {

fsdp_residency::fsdp_residency(std::vector<model::gpt_chunk>& chunks, grad_sync& sync, config::sharding_plan plan)
    : chunks_(chunks), sync_(sync), plan_(plan), held_(chunks.size()) {
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    auto& store = chunks_[c].store();
    if (plan_.shards_params()) {
      // The values shard laid out as the gradient shard: each region's slice at its place.
      const auto* shard = sync_.shard_of(c);
      if (!shard) throw std::logic_error("FSDP needs the distributed optimizer's shards");
      std::vector<model::held_range> ranges;
      for (const auto& r : shard->ranges) ranges.push_back({r.begin, r.end, r.at});
      store.keep_values_shard(std::move(ranges), static_cast<std::size_t>(shard->grads.numel()));
    }
    store.drop_grads();
  }
}

// A zeroed buffer: one of the two kept by --fsdp-double-buffer when one fits, else a new one.
// Gather buffers count as communication memory: the parameters a rank owns are its shard.
tensor::tensor fsdp_residency::take_buffer(std::int64_t numel, tensor::dtype type) {
  for (auto& b : spare_)
    if (b.defined() && b.numel() == numel && b.type() == type) {
      auto out = std::move(b);
      return out;
    }
  return tensor::tensor({numel}, type, tensor::memory_kind::communication);
}

void fsdp_residency::before_compute(int chunk, bool grads) {
  const auto c = static_cast<std::size_t>(chunk);
  auto& store = chunks_[c].store();
  auto& h = held_[c];
  const auto padded = static_cast<std::int64_t>(sync_.full_length(c));
  if (plan_.shards_params() && !h.values.defined()) {
    h.values = take_buffer(padded, store.type());
    sync_.gather_values(c, store.value_tensor().view(), h.values.view());
    store.bind_values(h.values.view());
  }
  if (grads && !h.grads.defined()) {
    // Padded: the reduce-scatter runs on it in place; the padding stays zero.
    h.grads = tensor::tensor({padded}, store.grad_type(), tensor::memory_kind::communication);
    store.bind_grads(h.grads.view());
  }
}

void fsdp_residency::release_values(std::size_t c) {
  auto& h = held_[c];
  if (!h.values.defined()) return;
  chunks_[c].store().unbind_values();
  if (plan_.double_buffer) {
    for (auto& b : spare_)
      if (!b.defined()) {
        b = std::move(h.values);
        return;
      }
    if (spare_.size() < 2) {
      spare_.push_back(std::move(h.values));
      return;
    }
  }
  h.values = tensor::tensor();
}

void fsdp_residency::after_forward(int chunk) {
  if (plan_.reshard_after_forward) release_values(static_cast<std::size_t>(chunk));
}

void fsdp_residency::after_backward(int chunk) {
  const auto c = static_cast<std::size_t>(chunk);
  auto& h = held_[c];
  if (h.grads.defined()) {
    // Sequence-parallel (and per-head norm) gradients are partial sums over the tensor-parallel
    // group: summed before the data-parallel reduction, each backward's share (a sum either way).
    chunks_[c].all_reduce_sequence_parallel_grads();
    sync_.reduce_into_shard(c, h.grads.view());
    chunks_[c].store().unbind_grads();
    h.grads = tensor::tensor();
  }
  release_values(c);
}

void fsdp_residency::release_all() {
  for (std::size_t c = 0; c < held_.size(); ++c) {
    if (held_[c].grads.defined()) throw std::logic_error("FSDP: a chunk's gradients were never reduced");
    release_values(c);
  }
}

void fsdp_residency::zero_grads() { sync_.zero_shard_grads(); }

}  // namespace mactor::training
