// FSDP's per-unit gradient buffers and their reduce-scatter (see fsdp_unit_grads.hpp).
#include "training/fsdp_unit_grads.hpp"

#include <memory>
#include <utility>

namespace mactor::training {

fsdp_unit_grads::fsdp_unit_grads(model::gpt_chunk& chunk, std::size_t index, grad_sync& sync, comm_worker& worker,
                                 model::parameter_units* gathers)
    : chunk_(chunk), index_(index), sync_(sync), worker_(worker), gathers_(gathers) {
  for (auto& layout : unit_layouts(chunk_, index_, sync_)) units_.push_back({std::move(layout), {}});
  chunk_.store().unbind_grads();
}

void fsdp_unit_grads::use(int unit, bool forward) {
  if (gathers_) gathers_->use(unit, forward);
  if (!forward) hold(unit);  // a backward writes the unit's gradients (a recomputed forward does not)
}

void fsdp_unit_grads::done(int unit, bool forward) {
  if (gathers_) gathers_->done(unit, forward);
  // The embedding's unit waits for the end of the backward: its own backward comes last.
  if (!forward && unit != 0) reduce(unit);
}

void fsdp_unit_grads::grads_needed(int unit) { hold(unit); }

void fsdp_unit_grads::after_backward() {
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) reduce(u);
}

bool fsdp_unit_grads::holds_grads() const {
  for (const auto& u : units_)
    if (u.grads.defined()) return true;
  return false;
}

void fsdp_unit_grads::hold(int unit) {
  auto& u = units_[std::size_t(unit)];
  if (u.length == 0 || u.grads.defined()) return;
  // One reduction may go on behind this unit's compute; older ones finish (and free) first.
  while (reducing_.size() > 1) {
    reducing_.front().get();  // rethrows a failed reduction
    reducing_.pop_front();
  }
  // Zeros, the padding included: the reduce-scatter runs on it in place.
  auto& store = chunk_.store();
  u.grads = tensor::tensor({u.length}, store.grad_type(), tensor::memory_kind::gradients, store.value_tensor().where());
  for (std::size_t i = 0; i < u.params.size(); ++i) {
    const auto place = static_cast<std::int64_t>(u.places[i]);
    store.bind_grad(u.params[i], u.grads.view().rows(place, place + static_cast<std::int64_t>(store[u.params[i]].numel)));
  }
}

void fsdp_unit_grads::reduce(int unit) {
  auto& u = units_[std::size_t(unit)];
  if (!u.grads.defined()) return;
  // Sequence-parallel (and per-head norm) gradients are partial sums over the tensor-parallel
  // group: summed here, on the compute's thread (its group), before the data-parallel reduction.
  chunk_.all_reduce_sequence_parallel_grads(unit);
  auto& store = chunk_.store();
  for (int id : u.params) store.unbind_grad(id);
  // The buffer goes with the job, and is freed on the collective thread once reduced.
  auto grads = std::make_shared<tensor::tensor>(std::move(u.grads));
  u.grads = tensor::tensor();
  auto done = std::make_shared<std::promise<void>>();
  reducing_.push_back(done->get_future().share());
  // The job never throws on the collective thread: a failed reduction reaches whoever waits.
  worker_.post([this, unit, grads, done] {
    try {
      sync_.reduce_unit_into_shard(index_, unit, grads->view());
      *grads = tensor::tensor();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
}

void fsdp_unit_grads::finish_reductions() {
  for (; !reducing_.empty(); reducing_.pop_front()) reducing_.front().get();
}

}  // namespace mactor::training
