// grad_sync's FSDP operations: the ZeRO-3 parameter all-gather into a chunk's whole buffer and
// the ZeRO-2 reduce-scatter of each backward's gradients into the shard, region by region.
#include <algorithm>
#include <stdexcept>

#include "kernels/tensor_ops.hpp"
#include "training/grad_sync.hpp"
#include "training/half_precision_collectives.hpp"

namespace mactor::training {

// The regions in ascending order: a region's padding, gathered in place past its end, lands
// on the next region's start, which that region's gather then overwrites.
void grad_sync::gather_values(std::size_t chunk, tensor::const_tensor_view shard, tensor::tensor_view full) {
  if (static_cast<std::size_t>(full.numel()) < full_length(chunk))
    throw std::logic_error("grad_sync::gather_values: the whole buffer is shorter than the padded layout");
  for (const auto& r : regions_) {
    if (r.chunk != chunk) continue;
    const auto at = static_cast<std::int64_t>(r.at), begin = static_cast<std::int64_t>(r.begin);
    const auto per = static_cast<std::int64_t>(r.hi - r.lo), padded = static_cast<std::int64_t>(r.padded);
    if (!r.shard_group) {  // this rank holds the whole region (experts with no expert-data-parallel replica)
      const auto numel = static_cast<std::int64_t>(r.end - r.begin);
      kernels::copy(full.rows(begin, begin + numel), shard.rows(at, at + numel));
      continue;
    }
    const trace_recorder::scope traced(*trace_, "fsdp params all-gather", "grad_sync",
                                       {{"chunk", static_cast<std::int64_t>(chunk)},
                                        {"bytes", padded * static_cast<std::int64_t>(tensor::size_of(full.type))},
                                        {"group_size", r.shard_group->size()}});
    auto into = full.rows(begin, begin + padded);
    r.shard_group->all_gather(shard.rows(at, at + per), into);
    param_gather_bytes_ += into.nbytes();
  }
}

std::size_t grad_sync::full_length(std::size_t chunk) const {
  std::size_t length = 0;
  for (const auto& r : regions_)
    if (r.chunk == chunk) length = std::max(length, r.begin + r.padded);
  if (length == 0 || shards_.empty()) throw std::logic_error("FSDP needs a sharded chunk");
  return length;
}

void grad_sync::reduce_into_shard(std::size_t chunk, tensor::tensor_view full) {
  if (!options_.sum_over_replicas && data_parallel_) kernels::scale(full, 1.0 / data_parallel_->size());
  for (const auto& r : regions_)
    if (r.chunk == chunk) reduce_region_into_shard(r, full);
}

void grad_sync::reduce_region_into_shard(const region& r, tensor::tensor_view full) {
  const auto lo = static_cast<std::int64_t>(r.begin), numel = static_cast<std::int64_t>(r.end - r.begin);
  auto mine = shards_[r.chunk].grads.view().rows(static_cast<std::int64_t>(r.at), static_cast<std::int64_t>(r.at + r.hi - r.lo));
  if (!r.shard_group) {  // one rank holds these (experts with no expert-data-parallel replica)
    kernels::add(mine, full.rows(lo, lo + numel));
    return;
  }
  const trace_recorder::scope traced(*trace_, "fsdp grads reduce-scatter", "grad_sync",
                                     {{"chunk", static_cast<std::int64_t>(r.chunk)},
                                      {"bytes", numel * static_cast<std::int64_t>(tensor::size_of(full.type))},
                                      {"group_size", r.shard_group->size()}});
  // In place where the region's padding lies past the chunk's end, else from a padded copy.
  const auto padded = static_cast<std::int64_t>(r.padded);
  tensor::tensor copy;
  auto in = full.rows(lo, std::min<std::int64_t>(lo + padded, full.numel()));
  if (lo + padded > static_cast<std::int64_t>(r.end) && r.end < static_cast<std::size_t>(chunks_[r.chunk].grads.numel())) {
    copy = tensor::tensor({padded}, full.type, tensor::memory_kind::communication);
    copy.zero();
    kernels::copy(copy.view().rows(0, numel), full.rows(lo, lo + numel));
    in = copy.view();
  }
  tensor::tensor part({static_cast<std::int64_t>(r.hi - r.lo)}, mine.type, tensor::memory_kind::communication);
  reduce_scatter_in(*r.shard_group, in, part.view());
  kernels::add(mine, part.view());
}

void grad_sync::zero_shard_grads() {
  for (auto& s : shards_) s.grads.zero();
}

}  // namespace mactor::training
