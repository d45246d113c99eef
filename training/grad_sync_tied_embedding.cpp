// grad_sync's tied-embedding sums: the first stage's word embedding and the last stage's copy
// (the tied output layer, or multi-token prediction's word table) get the sum of both gradients
// (Megatron's _allreduce_word_embedding_grads), over the embedding group, on one rank's two
// chunks (the V placement), or on the slices FSDP's sharded gradients hold.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/tensor_ops.hpp"
#include "training/grad_sync.hpp"
#include "training/half_precision_collectives.hpp"

namespace mactor::training {

void grad_sync::reduce_tied_embedding(std::size_t chunk, const synced_param& p) {
  const auto n = static_cast<std::int64_t>(p.offset);
  const trace_recorder::scope traced(*trace_, "embedding grads all-reduce", "grad_sync",
                                     {{"chunk", static_cast<std::int64_t>(chunk)},
                                      {"bytes", static_cast<std::int64_t>(p.numel * tensor::size_of(chunks_[chunk].grads.type))}});
  all_reduce_in(*embedding_, chunks_[chunk].grads.rows(n, n + static_cast<std::int64_t>(p.numel)));
}

// This rank's slice of p in its shard (a parameter lies in one region): the shard's place, the
// parameter's, the length (none when the slice is empty), and the region.
grad_sync::sharded_slice grad_sync::slice_of(std::size_t chunk, const synced_param& p) const {
  for (const auto& r : regions_) {
    if (r.chunk != chunk || p.offset >= r.end || p.offset + p.numel <= r.begin) continue;
    const std::size_t numel = r.end - r.begin;
    const std::size_t lo = std::max(p.offset, r.begin + std::min(r.lo, numel));
    const std::size_t hi = std::min(p.offset + p.numel, r.begin + std::min(r.hi, numel));
    if (lo >= hi) return {static_cast<std::int64_t>(r.at), 0, 0, &r};  // this rank holds none of it
    return {static_cast<std::int64_t>(r.at + (lo - (r.begin + r.lo))), static_cast<std::int64_t>(lo - p.offset),
            static_cast<std::int64_t>(hi - lo), &r};
  }
  throw std::logic_error("grad_sync: parameter at " + std::to_string(p.offset) + " is in no region of its chunk");
}

tensor::tensor grad_sync::whole_sharded_grad(std::size_t chunk, const synced_param& p) {
  const auto& grads = shards_[chunk].grads;
  tensor::tensor whole({static_cast<std::int64_t>(p.numel)}, grads.type(), tensor::memory_kind::communication,
                       grads.where());
  whole.zero();
  const auto s = slice_of(chunk, p);
  kernels::copy(whole.view().rows(s.whole, s.whole + s.n), grads.view().rows(s.shard, s.shard + s.n));
  // Each member adds its slice to zeros: the sum is the whole (data-parallel reduced) gradient.
  if (s.region->shard_group) all_reduce_in(*s.region->shard_group, whole.view());
  return whole;
}

void grad_sync::keep_sharded_slice(std::size_t chunk, const synced_param& p, const tensor::tensor& whole) {
  const auto s = slice_of(chunk, p);
  kernels::copy(shards_[chunk].grads.view().rows(s.shard, s.shard + s.n), whole.view().rows(s.whole, s.whole + s.n));
}

void grad_sync::reduce_sharded_tied_embedding(std::size_t chunk, const synced_param& p) {
  auto whole = whole_sharded_grad(chunk, p);
  {
    const trace_recorder::scope traced(*trace_, "embedding grads all-reduce", "grad_sync",
                                       {{"chunk", static_cast<std::int64_t>(chunk)},
                                        {"bytes", static_cast<std::int64_t>(whole.nbytes())}});
    all_reduce_in(*embedding_, whole.view());
  }
  keep_sharded_slice(chunk, p, whole);
}

void grad_sync::sum_local_tied_embedding() {
  if (options_.shard_grads) {  // each copy's slice in its chunk's shard: both made whole, summed
    std::vector<std::pair<std::size_t, const synced_param*>> tied;
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      for (const auto& p : chunks_[c].params)
        if (p.tied_embedding) tied.emplace_back(c, &p);
    if (tied.size() != 2)
      throw std::logic_error("a tied embedding on the V placement needs its two copies on this rank, found " +
                             std::to_string(tied.size()));
    auto first = whole_sharded_grad(tied[0].first, *tied[0].second);
    const auto second = whole_sharded_grad(tied[1].first, *tied[1].second);
    kernels::add(first.view(), second.view());
    for (const auto& [c, p] : tied) keep_sharded_slice(c, *p, first);
    return;
  }
  std::vector<tensor::tensor_view> copies;
  for (auto& c : chunks_)
    for (const auto& p : c.params)
      if (p.tied_embedding) {
        const auto n = static_cast<std::int64_t>(p.offset);
        copies.push_back(c.grads.rows(n, n + static_cast<std::int64_t>(p.numel)));
      }
  if (copies.size() != 2)
    throw std::logic_error("a tied embedding on the V placement needs its two copies on this rank, found " +
                           std::to_string(copies.size()));
  kernels::add(copies[0], copies[1]);
  kernels::copy(copies[1], copies[0]);
}

}  // namespace mactor::training
