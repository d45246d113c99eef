// Gradient buckets and their reduction, the distributed optimizer's shards and parameter
// all-gather, and their overlap on the background collective thread. (The tied-embedding sums
// are in grad_sync_tied_embedding.cpp, FSDP's gathers and reduce-scatters in grad_sync_fsdp.cpp.)
#include "training/grad_sync.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kernels/convert.hpp"
#include "kernels/reductions.hpp"
#include "kernels/tensor_ops.hpp"
#include "training/half_precision_collectives.hpp"

namespace mactor::training {
namespace {
constexpr int post_everything = std::numeric_limits<int>::min();
}  // namespace

grad_sync::grad_sync(std::vector<synced_chunk> chunks, grad_sync_options options, comm::communicator* data_parallel,
                     comm::communicator* embedding, step_timers& timers, stage_activity& activity,
                     comm::communicator* shard_group, comm::communicator* instances,
                     comm::communicator* expert_data_parallel, comm::communicator* expert_shard_group)
    : chunks_(std::move(chunks)), options_(options), data_parallel_(data_parallel),
      shard_group_(shard_group || instances ? shard_group : data_parallel), instances_(instances),
      expert_data_parallel_(expert_data_parallel),
      expert_shard_group_(expert_shard_group || instances ? expert_shard_group : expert_data_parallel),
      embedding_(embedding), timers_(timers), activity_(activity) {
  build_regions();
  const int shards = shard_group_ ? shard_group_->size() : 1;
  if (options_.distributed_optimizer && shards > 1) build_shards();
  const int dp = data_parallel_ ? data_parallel_->size() : 1;
  if (options_.overlap_grad_reduce && dp > 1)
    build_buckets(shards_.empty() ? options_.bucket_size : std::numeric_limits<std::int64_t>::max());
  if (options_.local_tied_embedding && !buckets_.empty())
    throw std::logic_error("grad_sync: a tied embedding on the V placement cannot be reduced by overlapped buckets");
  if (!buckets_.empty() || (options_.overlap_param_gather && !shards_.empty()))
    background_ = std::make_unique<comm_worker>();
}

void grad_sync::build_regions() {
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const auto numel = static_cast<std::size_t>(chunks_[c].grads.numel());
    const std::size_t split = options_.expert_parallel ? std::min(chunks_[c].expert_begin, numel) : numel;
    auto add = [&](std::size_t begin, std::size_t end, comm::communicator* group, comm::communicator* shards,
                   comm::communicator* instances) {
      auto& r = regions_.emplace_back();
      r.chunk = c, r.begin = begin, r.end = end, r.group = group, r.shard_group = shards, r.instances = instances;
    };
    if (!options_.shard_grads) {
      add(0, split, data_parallel_, shard_group_, instances_);
      if (split < numel) add(split, numel, expert_data_parallel_, expert_shard_group_, instances_);
      continue;
    }
    // FSDP (sharded gradients, ZeRO-2 and ZeRO-3 alike, as Megatron FSDP's buckets): each unit's
    // parameters in each part a region of their own, reduce-scattered (and under ZeRO-3 gathered)
    // alone (a unit's parameters lie together in flat order: the embedding, each layer, the
    // rest; the experts by layer).
    std::vector<const synced_param*> params;
    for (const auto& p : chunks_[c].params)
      if (p.numel > 0) params.push_back(&p);
    std::sort(params.begin(), params.end(), [](const auto* a, const auto* b) { return a->offset < b->offset; });
    for (const auto& [lo, hi, experts] : {std::tuple{std::size_t{0}, split, false}, std::tuple{split, numel, true}}) {
      std::size_t begin = lo;
      int unit = -1;
      for (const auto* p : params) {
        if (p->offset < lo || p->offset >= hi) continue;
        if (unit >= 0 && p->unit != unit) {
          add(begin, p->offset, experts ? expert_data_parallel_ : data_parallel_,
              experts ? expert_shard_group_ : shard_group_, instances_);
          regions_.back().unit = unit;
          begin = p->offset;
        }
        unit = p->unit;
      }
      if (begin < hi && unit >= 0) {
        add(begin, hi, experts ? expert_data_parallel_ : data_parallel_, experts ? expert_shard_group_ : shard_group_,
            instances_);
        regions_.back().unit = unit;
      }
    }
  }
}

// Megatron's distributed optimizer: each region padded to a multiple of its shard group's size
// and split evenly; a chunk's shard gradients hold its regions' slices one after the other.
void grad_sync::build_shards() {
  shards_.resize(chunks_.size());
  std::vector<std::size_t> used(chunks_.size(), 0);
  for (auto& r : regions_) {
    const std::size_t ranks = r.shard_group ? static_cast<std::size_t>(r.shard_group->size()) : 1;
    const std::size_t rank = r.shard_group ? static_cast<std::size_t>(r.shard_group->rank()) : 0;
    const std::size_t numel = r.end - r.begin;
    r.padded = (numel + ranks - 1) / ranks * ranks;
    r.lo = r.padded / ranks * rank;
    r.hi = r.lo + r.padded / ranks;
    r.at = used[r.chunk];
    used[r.chunk] += r.hi - r.lo;
    shards_[r.chunk].ranges.push_back({r.begin + std::min(r.lo, numel), r.begin + std::min(r.hi, numel), r.at});
    const auto& c = chunks_[r.chunk];
    const auto padded = static_cast<std::int64_t>(r.padded);
    // The whole-chunk buffers the collectives run on; FSDP's sharded gradients and parameters
    // run on the engine's temporary whole buffers instead.
    if (!options_.shard_grads)
      r.scratch = tensor::tensor({padded}, c.grads.type, tensor::memory_kind::communication, c.grads.where);
    // A 16-bit model gathers its 16-bit values: a buffer of their dtype beside the fp32 scratch.
    if (!options_.shard_params && (c.values.type != c.grads.type || options_.shard_grads))
      r.gathered = tensor::tensor({padded}, c.values.type, tensor::memory_kind::communication, c.values.where);
  }
  for (std::size_t c = 0; c < chunks_.size(); ++c)
    shards_[c].grads = tensor::tensor({static_cast<std::int64_t>(used[c])}, chunks_[c].grads.type,
                                      tensor::memory_kind::gradients, chunks_[c].grads.where);
}

grad_sync::shard* grad_sync::shard_of(std::size_t chunk) {
  return shards_.empty() ? nullptr : &shards_[chunk];
}

void grad_sync::build_buckets(std::int64_t bucket_size) {
  // The last chunk's last backward comes first (the interleaved schedule's cooldown runs the
  // chunks in reverse): its buckets come first; within a chunk, the experts' region (the end of
  // the buffer) first.
  for (std::size_t ri = regions_.size(); ri-- > 0;) {
    const auto& r = regions_[ri];
    const auto& chunk = chunks_[r.chunk];
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < chunk.params.size(); ++i)
      if (chunk.params[i].offset >= r.begin && chunk.params[i].offset < r.end) order.push_back(i);
    // Backward finishes the parameters roughly in reverse order of registration: bucket from the end.
    std::sort(order.begin(), order.end(),
              [&](std::size_t x, std::size_t y) { return chunk.params[x].offset > chunk.params[y].offset; });
    bucket b;
    b.region = ri;
    b.end = b.begin = r.end;
    b.ready_event = std::numeric_limits<int>::max();
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto& p = chunk.params[order[i]];
      if (p.offset + p.numel != b.begin)
        throw std::logic_error("gradient buffer of chunk " + std::to_string(r.chunk) + " is not contiguous");
      b.begin = p.offset;
      b.ready_event = std::min(b.ready_event, p.ready_event);
      if (p.tied_embedding && embedding_) b.tied_embedding = order[i];
      if (static_cast<std::int64_t>(b.end - b.begin) >= bucket_size || i + 1 == order.size()) {
        buckets_.push_back(b);
        b.end = b.begin;
        b.ready_event = std::numeric_limits<int>::max();
        b.tied_embedding.reset();
      }
    }
  }
}

// One bucket's share of finish_grad_sync, on the background thread: the tied embedding's
// cross-stage sum, then the data-parallel mean.
void grad_sync::reduce_bucket(const bucket& b) {
  const auto& r = regions_[b.region];
  if (options_.check_for_large_grads) record_local_norm(r.chunk, b.begin, b.end);
  if (b.tied_embedding) reduce_tied_embedding(r.chunk, chunks_[r.chunk].params[*b.tied_embedding]);
  reduce_over_replicas(b.region, b.begin, b.end);
}

// Megatron's DDP: scale by 1/dp, then sum over the region's replicas, so every replica holds the
// mean of grads [begin, end) of the region's chunk (all of the region with the distributed
// optimizer, whose reduce-scatter leaves this rank's slice of the sum in its shard); with
// --calculate-per-token-loss the plain sum. The experts' region scales by 1/dp too and sums over
// the expert-data-parallel replicas: each expert's gradient already holds the tokens that every
// expert-parallel rank sent it.
void grad_sync::reduce_over_replicas(std::size_t ri, std::size_t begin, std::size_t end) {
  auto& r = regions_[ri];
  auto grads = chunks_[r.chunk].grads.rows(static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end));
  const bool experts = r.group != data_parallel_;
  const trace_recorder::scope traced(
      *trace_,
      shards_.empty() ? (experts ? "expert-data-parallel grads all-reduce" : "data-parallel grads all-reduce")
                      : (experts ? "expert-data-parallel grads reduce-scatter" : "data-parallel grads reduce-scatter"),
      "grad_sync",
      {{"chunk", static_cast<std::int64_t>(r.chunk)},
       {"bytes", static_cast<std::int64_t>(grads.nbytes())},
       {"group_size", r.group ? r.group->size() : 1}});
  if (!options_.sum_over_replicas && data_parallel_) kernels::scale(grads, 1.0 / data_parallel_->size());
  if (shards_.empty()) {
    if (r.group) all_reduce_in(*r.group, grads);
    return;
  }
  if (begin != r.begin || end != r.end) throw std::logic_error("the distributed optimizer reduces whole regions");
  const auto numel = static_cast<std::int64_t>(r.end - r.begin);
  auto mine = shards_[r.chunk].grads.view().rows(static_cast<std::int64_t>(r.at), static_cast<std::int64_t>(r.at + r.hi - r.lo));
  if (!r.shard_group) {
    kernels::copy(mine.rows(0, numel), grads);  // this rank holds the whole region (in its instance)
  } else {
    kernels::copy(r.scratch.view().rows(0, numel), grads);
    kernels::fill_zero(r.scratch.view().rows(numel, static_cast<std::int64_t>(r.padded)));
    reduce_scatter_in(*r.shard_group, r.scratch.view(), mine);
  }
  // Partial sharding: each instance reduced its replicas' part; the instances' shards are summed.
  if (r.instances) all_reduce_in(*r.instances, mine);
}

void grad_sync::backward_progress(int chunk, int event) {
  while (next_bucket_ < buckets_.size()) {
    const auto& b = buckets_[next_bucket_];
    if (event != post_everything && (static_cast<int>(regions_[b.region].chunk) != chunk || b.ready_event < event)) return;
    background_->post([this, &b] { reduce_bucket(b); });
    ++next_bucket_;
  }
}

void grad_sync::wait_background(const char* why) {
  const stage_activity::background_wait waiting(activity_, why);
  const trace_recorder::scope traced(*trace_, "wait for background collectives", "grad_sync");
  background_->wait();
}

void grad_sync::record_local_norm(std::size_t c, std::size_t begin, std::size_t end) {
  const auto rows = chunks_[c].grads.rows(static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end));
  tensor::tensor wide;
  if (rows.type != tensor::dtype::float32) {
    wide = tensor::tensor({static_cast<std::int64_t>(end - begin)}, tensor::dtype::float32,
                          tensor::memory_kind::communication, rows.where);
    kernels::convert(wide.view(), rows);
  }
  const double sum = kernels::sum_of_squares(wide.defined() ? tensor::const_tensor_view(wide.view()) : rows);
  local_norms_.push_back(static_cast<float>(std::sqrt(sum)));  // Megatron's norm is an fp32 tensor
}

void grad_sync::record_local_grad_norms() {
  if (!options_.check_for_large_grads || overlapped()) return;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const auto numel = static_cast<std::size_t>(chunks_[c].grads.numel());
    const synced_param* tied = nullptr;
    if (options_.distributed_optimizer && shares_embedding())
      for (const auto& p : chunks_[c].params)
        if (p.tied_embedding) tied = &p;
    if (!tied) {
      record_local_norm(c, 0, numel);
      continue;
    }
    // Megatron's buffer takes the parameters in reverse: those after the embedding, the
    // embedding alone, those before it.
    const std::size_t lo = tied->offset, hi = tied->offset + tied->numel;
    if (hi < numel) record_local_norm(c, hi, numel);
    record_local_norm(c, lo, hi);
    if (lo > 0) record_local_norm(c, 0, lo);
  }
}

void grad_sync::finish_grad_sync() {
  if (overlapped()) {
    // What is left of the data-parallel sync (Megatron's finish_grad_sync): post any bucket
    // left (a chunk without micro-batches) and wait for them all. The tied-embedding sums went
    // with their buckets: there is no separate embedding-grads-all-reduce to time.
    const auto timed = timers_.time(step_timer::all_grads_sync);
    backward_progress(-1, post_everything);
    next_bucket_ = 0;
    wait_background("the overlapped gradient reduction");
    return;
  }
  // Tied embeddings: the first stage's embedding and the last stage's copy get the sum of both
  // gradients (Megatron's _allreduce_word_embedding_grads), before the data-parallel mean.
  // Megatron times both parts on every rank, whether or not there is anything to reduce.
  {
    const auto timed = timers_.time(step_timer::embedding_grads_all_reduce);
    if (options_.local_tied_embedding) sum_local_tied_embedding();
    if (embedding_)
      for (std::size_t c = 0; c < chunks_.size(); ++c)
        for (const auto& p : chunks_[c].params)
          if (p.tied_embedding) options_.shard_grads ? reduce_sharded_tied_embedding(c, p) : reduce_tied_embedding(c, p);
  }
  const auto timed = timers_.time(step_timer::all_grads_sync);
  if (!data_parallel_) return;
  if (options_.shard_grads) {
    // FSDP reduced each backward's gradients within its instance; Megatron FSDP's hybrid
    // sharding (--num-distributed-optimizer-instances) sums the instances' shards, once a step.
    for (const auto& r : regions_)
      if (r.instances)
        all_reduce_in(*r.instances, shards_[r.chunk].grads.view().rows(static_cast<std::int64_t>(r.at),
                                                                       static_cast<std::int64_t>(r.at + r.hi - r.lo)));
    return;
  }
  for (std::size_t r = 0; r < regions_.size(); ++r) reduce_over_replicas(r, regions_[r].begin, regions_[r].end);
}

void grad_sync::gather_fp8(std::size_t chunk, tensor::tensor_view values, std::uint8_t* bytes,
                           std::vector<fp8_weight_place> weights) {
  if (fp8_.size() < chunks_.size()) fp8_.resize(chunks_.size());
  fp8_[chunk] = {bytes, std::move(weights)};
  chunks_[chunk].values = values;
  // The packed all-gather brings its own buffers.
  for (auto& r : regions_)
    if (r.chunk == chunk) r.gathered = tensor::tensor();
}

// The all-gather of a region with fp8 weights: each member's slice packed as its model values
// and fp8 bytes, every payload padded to the largest (the slices' boundaries are known to all).
void grad_sync::gather_packed(std::size_t ri) {
  const auto& r = regions_[ri];
  const auto& f = fp8_[r.chunk];
  auto values = chunks_[r.chunk].values;
  const int n = r.shard_group->size();
  const std::size_t size = tensor::size_of(values.type), per = r.padded / static_cast<std::size_t>(n);
  std::vector<std::vector<gather_run>> runs(static_cast<std::size_t>(n));
  std::size_t payload = 0;
  for (int m = 0; m < n; ++m) {
    const std::size_t begin = r.begin + per * static_cast<std::size_t>(m);
    runs[m] = gather_runs(begin, begin + per, r.end, f.weights);
    payload = std::max(payload, packed_bytes(runs[m], size));
  }
  std::vector<std::byte> mine(payload), all(payload * static_cast<std::size_t>(n));
  pack_runs(runs[r.shard_group->rank()], values, f.bytes, mine.data());
  const trace_recorder::scope traced(*trace_, "data-parallel params all-gather", "grad_sync",
                                     {{"chunk", static_cast<std::int64_t>(r.chunk)},
                                      {"bytes", static_cast<std::int64_t>(all.size())},
                                      {"group_size", n}});
  r.shard_group->all_gather_bytes(mine, all);
  param_gather_bytes_ += all.size();
  for (int m = 0; m < n; ++m)
    if (m != r.shard_group->rank()) unpack_runs(runs[m], all.data() + payload * static_cast<std::size_t>(m), values, f.bytes);
}

void grad_sync::gather_params(std::size_t ri) {
  auto& r = regions_[ri];
  if (!r.shard_group) return;  // this rank updated the whole region
  if (r.chunk < fp8_.size() && fp8_[r.chunk].bytes) return gather_packed(ri);
  auto values = chunks_[r.chunk].values.rows(static_cast<std::int64_t>(r.begin), static_cast<std::int64_t>(r.end));
  const auto lo = static_cast<std::int64_t>(r.lo), hi = static_cast<std::int64_t>(r.hi);
  const auto numel = static_cast<std::int64_t>(r.end - r.begin);
  tensor::tensor mine({hi - lo}, values.type, tensor::memory_kind::communication, values.where);
  if (lo < numel) kernels::copy(mine.view().rows(0, std::min(hi, numel) - lo), values.rows(lo, std::min(hi, numel)));
  auto& gathered = r.gathered.defined() ? r.gathered : r.scratch;
  const trace_recorder::scope traced(*trace_,
                                     r.group == data_parallel_ ? "data-parallel params all-gather"
                                                               : "expert-data-parallel params all-gather",
                                     "grad_sync",
                                     {{"chunk", static_cast<std::int64_t>(r.chunk)},
                                      {"bytes", static_cast<std::int64_t>(gathered.nbytes())},
                                      {"group_size", r.shard_group->size()}});
  r.shard_group->all_gather(mine.view(), gathered.view());
  param_gather_bytes_ += gathered.nbytes();
  kernels::copy(values, gathered.view().rows(0, numel));
}

void grad_sync::start_param_sync() {
  if (shards_.empty() || options_.shard_params) return;  // ZeRO-3 gathers before each compute
  const bool overlap = options_.overlap_param_gather && background_;
  for (std::size_t r = 0; r < regions_.size(); ++r) {
    if (overlap)
      background_->post([this, r] { gather_params(r); });
    else
      gather_params(r);
  }
  params_pending_ = overlap;
}

void grad_sync::wait_param_sync() {
  if (!params_pending_) return;
  wait_background("the overlapped parameter all-gather");
  params_pending_ = false;
}

}  // namespace mactor::training
