// A chunk's whole gradients held only around its compute, its values unit by unit (see
// fsdp_residency.hpp).
#include "training/fsdp_residency.hpp"

#include <stdexcept>

namespace mactor::training {

fsdp_residency::fsdp_residency(std::vector<model::gpt_chunk>& chunks, grad_sync& sync, config::sharding_plan plan)
    : chunks_(chunks), sync_(sync), plan_(plan), grads_(chunks.size()), buffers_(plan.double_buffer) {
  if (plan_.shards_params()) worker_ = std::make_unique<comm_worker>();
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    auto& store = chunks_[c].store();
    if (plan_.shards_params()) {
      // The values shard laid out as the gradient shard: each region's slice at its place.
      const auto* shard = sync_.shard_of(c);
      if (!shard) throw std::logic_error("FSDP needs the distributed optimizer's shards");
      std::vector<model::held_range> ranges;
      for (const auto& r : shard->ranges) ranges.push_back({r.begin, r.end, r.at});
      store.keep_values_shard(std::move(ranges), static_cast<std::size_t>(shard->grads.numel()));
      units_.push_back(std::make_unique<fsdp_units>(chunks_[c], c, sync_, *worker_, buffers_, plan_.reshard_after_forward));
      chunks_[c].set_parameter_units(units_.back().get());
    }
    store.drop_grads();
  }
}

fsdp_residency::~fsdp_residency() {
  if (worker_) worker_->wait();
  for (auto& c : chunks_) c.set_parameter_units(nullptr);
}

void fsdp_residency::before_compute(int chunk, bool forward, bool grads) {
  const auto c = static_cast<std::size_t>(chunk);
  if (!units_.empty()) units_[c]->begin_pass(forward);
  if (grads && !grads_[c].defined()) {
    // Padded: the reduce-scatter runs on it in place; the padding stays zero.
    auto& store = chunks_[c].store();
    grads_[c] = tensor::tensor({static_cast<std::int64_t>(sync_.full_length(c))}, store.grad_type(),
                               tensor::memory_kind::communication);
    store.bind_grads(grads_[c].view());
  }
}

void fsdp_residency::after_forward(int chunk) {
  if (!units_.empty()) units_[static_cast<std::size_t>(chunk)]->end_pass(!plan_.reshard_after_forward);
}

void fsdp_residency::after_backward(int chunk) {
  const auto c = static_cast<std::size_t>(chunk);
  // The gathers are done before the shard group's reduce-scatter runs on this thread.
  if (!units_.empty()) units_[c]->end_pass(false);
  if (grads_[c].defined()) {
    // Sequence-parallel (and per-head norm) gradients are partial sums over the tensor-parallel
    // group: summed before the data-parallel reduction, each backward's share (a sum either way).
    chunks_[c].all_reduce_sequence_parallel_grads();
    sync_.reduce_into_shard(c, grads_[c].view());
    chunks_[c].store().unbind_grads();
    grads_[c] = tensor::tensor();
  }
}

void fsdp_residency::release_all() {
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    if (grads_[c].defined()) throw std::logic_error("FSDP: a chunk's gradients were never reduced");
    if (!units_.empty()) units_[c]->end_pass(false);
  }
}

void fsdp_residency::zero_grads() { sync_.zero_shard_grads(); }

}  // namespace mactor::training
