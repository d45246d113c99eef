// A chunk's values and gradients held unit by unit (see fsdp_residency.hpp).
#include "training/fsdp_residency.hpp"

#include <stdexcept>

namespace mactor::training {

fsdp_residency::fsdp_residency(std::vector<model::gpt_chunk>& chunks, grad_sync& sync, config::sharding_plan plan)
    : chunks_(chunks), sync_(sync), plan_(plan), buffers_(plan.double_buffer), worker_(std::make_unique<comm_worker>()) {
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    auto& store = chunks_[c].store();
    model::parameter_units* gathers = nullptr;
    if (plan_.shards_params()) {
      // The values shard laid out as the gradient shard: each region's slice at its place.
      const auto* shard = sync_.shard_of(c);
      if (!shard) throw std::logic_error("FSDP needs the distributed optimizer's shards");
      std::vector<model::held_range> ranges;
      for (const auto& r : shard->ranges) ranges.push_back({r.begin, r.end, r.at});
      const auto length = static_cast<std::size_t>(shard->grads.numel());
      // --init-model-with-meta-device: the chunk was only laid out; hold and draw just the shard.
      if (store.laid_out_only()) chunks_[c].materialize_shard(std::move(ranges), length);
      else store.keep_values_shard(std::move(ranges), length);
      units_.push_back(std::make_unique<fsdp_units>(chunks_[c], c, sync_, *worker_, buffers_, plan_.reshard_after_forward));
      gathers = units_.back().get();
    }
    store.drop_grads();
    grads_.push_back(std::make_unique<fsdp_unit_grads>(chunks_[c], c, sync_, *worker_, gathers));
    chunks_[c].set_parameter_units(grads_.back().get());
  }
}

fsdp_residency::~fsdp_residency() {
  try {
    worker_->wait();
  } catch (...) {  // an error of a collective already reported to whoever waited
  }
  for (auto& c : chunks_) c.set_parameter_units(nullptr);
}

void fsdp_residency::before_compute(int chunk, bool forward) {
  if (!units_.empty()) units_[static_cast<std::size_t>(chunk)]->begin_pass(forward);
}

void fsdp_residency::after_forward(int chunk) {
  if (!units_.empty()) units_[static_cast<std::size_t>(chunk)]->end_pass(!plan_.reshard_after_forward);
}

void fsdp_residency::after_backward(int chunk) {
  const auto c = static_cast<std::size_t>(chunk);
  grads_[c]->after_backward();
  // Every gather and reduction done (the stage uses no communicator the worker may be using
  // between computes), then the gathered units freed.
  grads_[c]->finish_reductions();
  if (!units_.empty()) units_[c]->end_pass(false);
}

void fsdp_residency::release_all() {
  for (auto& g : grads_) g->finish_reductions();
  worker_->wait();
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    if (grads_[c]->holds_grads()) throw std::logic_error("FSDP: a chunk's gradients were never reduced");
    if (!units_.empty()) units_[c]->end_pass(false);
  }
}

void fsdp_residency::zero_grads() { sync_.zero_shard_grads(); }

}  // namespace mactor::training
