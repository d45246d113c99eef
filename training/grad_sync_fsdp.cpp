// grad_sync's FSDP operations, one unit at a time: the ZeRO-3 parameter all-gather of a unit's
// regions and the reduce-scatter of its gradients into the shard (ZeRO-2 and ZeRO-3).
#include <algorithm>
#include <stdexcept>

#include "kernels/tensor_ops.hpp"
#include "training/grad_sync.hpp"
#include "training/half_precision_collectives.hpp"

namespace mactor::training {

std::size_t grad_sync::unit_length(std::size_t chunk, int unit) const {
  std::size_t length = 0;
  for (const auto& r : regions_)
    if (r.chunk == chunk && r.unit == unit) length += r.padded;
  return length;
}

std::size_t grad_sync::unit_place(std::size_t chunk, int unit, std::size_t flat) const {
  std::size_t at = 0;
  for (const auto& r : regions_) {
    if (r.chunk != chunk || r.unit != unit) continue;
    if (flat >= r.begin && flat < r.end) return at + (flat - r.begin);
    at += r.padded;
  }
  throw std::logic_error("grad_sync::unit_place: flat element " + std::to_string(flat) + " is not in unit " +
                         std::to_string(unit) + " of chunk " + std::to_string(chunk));
}

// Each region of the unit gathered over its own shard group (the experts' over the
// expert-data-parallel one; where they have no replica, this rank's are copied), one after another.
void grad_sync::gather_unit(std::size_t chunk, int unit, tensor::const_tensor_view shard, tensor::tensor_view full,
                            bool prefetched) {
  if (static_cast<std::size_t>(full.numel()) < unit_length(chunk, unit))
    throw std::logic_error("grad_sync::gather_unit: the buffer is shorter than the unit's padded regions");
  std::int64_t to = 0;
  for (const auto& r : regions_) {
    if (r.chunk != chunk || r.unit != unit) continue;
    const auto at = static_cast<std::int64_t>(r.at), per = static_cast<std::int64_t>(r.hi - r.lo);
    const auto padded = static_cast<std::int64_t>(r.padded);
    auto into = full.rows(to, to + padded);
    to += padded;
    if (!r.shard_group) {
      const auto numel = static_cast<std::int64_t>(r.end - r.begin);
      kernels::copy(into.rows(0, numel), shard.rows(at, at + numel));
      continue;
    }
    const trace_recorder::scope traced(*trace_, "fsdp params all-gather", "grad_sync",
                                       {{"chunk", static_cast<std::int64_t>(chunk)},
                                        {"unit", unit},
                                        {"prefetched", prefetched ? 1 : 0},
                                        {"bytes", padded * static_cast<std::int64_t>(tensor::size_of(full.type))},
                                        {"group_size", r.shard_group->size()}});
    r.shard_group->all_gather(shard.rows(at, at + per), into);
    param_gather_bytes_ += into.nbytes();
  }
}

// Each region of the unit (padded, in the gather buffer's layout) reduce-scattered over its own
// shard group in place, this rank's slice added to the shard's gradients.
void grad_sync::reduce_unit_into_shard(std::size_t chunk, int unit, tensor::tensor_view grads) {
  if (static_cast<std::size_t>(grads.numel()) < unit_length(chunk, unit))
    throw std::logic_error("grad_sync::reduce_unit_into_shard: the buffer is shorter than the unit's padded regions");
  if (!options_.sum_over_replicas && data_parallel_) kernels::scale(grads, 1.0 / data_parallel_->size());
  std::int64_t from = 0;
  for (const auto& r : regions_) {
    if (r.chunk != chunk || r.unit != unit) continue;
    const auto numel = static_cast<std::int64_t>(r.end - r.begin), padded = static_cast<std::int64_t>(r.padded);
    auto in = grads.rows(from, from + padded);
    from += padded;
    auto mine = shards_[r.chunk].grads.view().rows(static_cast<std::int64_t>(r.at), static_cast<std::int64_t>(r.at + r.hi - r.lo));
    if (!r.shard_group) {  // one rank holds these (experts with no expert-data-parallel replica)
      kernels::add(mine, in.rows(0, numel));
      continue;
    }
    const trace_recorder::scope traced(*trace_, "fsdp grads reduce-scatter", "grad_sync",
                                       {{"chunk", static_cast<std::int64_t>(r.chunk)},
                                        {"unit", unit},
                                        {"bytes", numel * static_cast<std::int64_t>(tensor::size_of(grads.type))},
                                        {"group_size", r.shard_group->size()}});
    tensor::tensor part({static_cast<std::int64_t>(r.hi - r.lo)}, mine.type, tensor::memory_kind::communication, mine.where);
    reduce_scatter_in(*r.shard_group, in, part.view());
    kernels::add(mine, part.view());
  }
}

void grad_sync::zero_shard_grads() {
  for (auto& s : shards_) s.grads.zero();
}

}  // namespace mactor::training
