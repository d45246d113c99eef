// ZeRO-3's per-unit gathers, binding and prefetch (see fsdp_units.hpp).
#include "training/fsdp_units.hpp"

#include <exception>
#include <memory>
#include <utility>

namespace mactor::training {

std::vector<unit_layout> unit_layouts(model::gpt_chunk& chunk, std::size_t index, const grad_sync& sync) {
  std::vector<unit_layout> units(static_cast<std::size_t>(chunk.num_units()));
  const auto& params = chunk.parameters();
  for (std::size_t id = 0; id < params.size(); ++id) {
    const auto& p = params[id];
    if (p.numel == 0) continue;
    const int unit = chunk.unit_of(p);
    auto& u = units[static_cast<std::size_t>(unit)];
    u.params.push_back(static_cast<int>(id));
    u.places.push_back(sync.unit_place(index, unit, p.offset));
  }
  for (std::size_t u = 0; u < units.size(); ++u)
    if (!units[u].params.empty()) units[u].length = static_cast<std::int64_t>(sync.unit_length(index, int(u)));
  return units;
}

tensor::tensor fsdp_buffers::take(std::int64_t numel, tensor::dtype type, tensor::device where) {
  for (auto& b : spare_)
    if (b.defined() && b.numel() == numel && b.type() == type && b.where() == where) return std::move(b);
  return tensor::tensor({numel}, type, tensor::memory_kind::communication, where);
}

void fsdp_buffers::give_back(tensor::tensor buffer) {
  if (!keep_ || !buffer.defined()) return;
  for (auto& b : spare_)
    if (!b.defined()) {
      b = std::move(buffer);
      return;
    }
  if (spare_.size() < 2) spare_.push_back(std::move(buffer));
}

fsdp_units::fsdp_units(model::gpt_chunk& chunk, std::size_t index, grad_sync& sync, comm_worker& worker,
                       fsdp_buffers& buffers, bool reshard_after_forward)
    : chunk_(chunk), index_(index), sync_(sync), worker_(worker), buffers_(buffers),
      reshard_after_forward_(reshard_after_forward) {
  for (auto& layout : unit_layouts(chunk_, index_, sync_)) units_.push_back({std::move(layout), {}, {}});
  chunk_.store().unbind_values();
}

void fsdp_units::begin_pass(bool forward) {
  forward_pass_ = forward;
  for (auto& u : units_) u.visited = false;
}

// The job never throws on the collective thread: a failed gather reaches whoever waits for the unit.
void fsdp_units::post_gather(int unit, bool prefetch) {
  auto& u = units_[std::size_t(unit)];
  u.values = buffers_.take(u.length, chunk_.store().type(), chunk_.store().value_tensor().where());
  auto done = std::make_shared<std::promise<void>>();
  u.gathered = done->get_future().share();
  u.posted = true;
  worker_.post([this, unit, done, prefetch, shard = chunk_.store().value_tensor().view(), full = u.values.view()] {
    try {
      sync_.gather_unit(index_, unit, shard, full, prefetch);
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
}

void fsdp_units::use(int unit, bool forward) {
  auto& u = units_[std::size_t(unit)];
  if (u.length == 0) return;
  u.visited = true;
  if (!u.posted) post_gather(unit, false);
  // The next unit this pass has not used yet, gathered while this one computes (a backward
  // never gathers the embedding's: its backward reads no values).
  const int next = forward ? unit + 1 : unit - 1;
  if (next >= (forward ? 0 : 1) && next < num_units()) {
    auto& n = units_[std::size_t(next)];
    if (n.length > 0 && !n.posted && !n.visited) post_gather(next, true);
  }
  {
    // What the compute waits for its unit: the gather not hidden behind the previous unit's compute.
    const trace_recorder::scope traced(sync_.trace(), "fsdp wait for unit", "grad_sync",
                                       {{"chunk", static_cast<std::int64_t>(index_)}, {"unit", unit}});
    u.gathered.get();  // rethrows a failed gather
  }
  if (u.bound) return;
  auto& store = chunk_.store();
  for (std::size_t i = 0; i < u.params.size(); ++i) {
    const auto place = static_cast<std::int64_t>(u.places[i]);
    const auto numel = static_cast<std::int64_t>(store[u.params[i]].numel);
    store.bind_value(u.params[i], u.values.view().rows(place, place + numel));
  }
  u.bound = true;
}

void fsdp_units::done(int unit, bool forward) {
  // A forward pass frees each unit after it unless told to keep them for the backward; a
  // backward frees a unit after its backward, not after its recomputed forward.
  if (forward_pass_ ? reshard_after_forward_ : !forward) release(unit);
}

void fsdp_units::release(int unit) {
  auto& u = units_[std::size_t(unit)];
  if (!u.posted) return;
  u.gathered.get();
  auto& store = chunk_.store();
  for (int id : u.params) store.unbind_value(id);
  buffers_.give_back(std::move(u.values));
  u.values = tensor::tensor();
  u.posted = u.bound = false;
}

void fsdp_units::end_pass(bool keep_gathered) {
  worker_.wait();
  for (int u = 0; u < num_units(); ++u) {
    auto& s = units_[std::size_t(u)];
    if (keep_gathered && s.posted) {
      s.gathered.get();
      continue;
    }
    release(u);
  }
}

}  // namespace mactor::training
