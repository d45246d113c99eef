// Gradient buckets and their reduction, the tied-embedding sum, the distributed optimizer's
// shards and parameter all-gather, and their overlap on the background collective thread.
#include "training/grad_sync.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/convert.hpp"
#include "kernels/tensor_ops.hpp"

namespace mactor::training {
namespace {
constexpr int post_everything = std::numeric_limits<int>::min();

// The data plane reduces fp32 and fp64: a bf16 gradient buffer (--grad-reduce-in-bf16) is
// widened, summed in fp32 and rounded back to bf16 once.
tensor::tensor wide_copy(tensor::const_tensor_view v) {
  tensor::tensor wide({v.numel()}, tensor::dtype::float32, tensor::memory_kind::communication);
  kernels::convert(wide, v);
  return wide;
}

void all_reduce_in(comm::communicator& group, tensor::tensor_view data) {
  if (!tensor::is_half_precision(data.type)) return group.all_reduce(data);
  auto wide = wide_copy(data);
  group.all_reduce(wide.view());
  kernels::convert(data, wide);
}

void reduce_scatter_in(comm::communicator& group, tensor::const_tensor_view in, tensor::tensor_view out) {
  if (!tensor::is_half_precision(out.type)) return group.reduce_scatter(in, out);
  auto wide_in = wide_copy(in);
  tensor::tensor wide_out({out.numel()}, tensor::dtype::float32, tensor::memory_kind::communication);
  group.reduce_scatter(wide_in.view(), wide_out.view());
  kernels::convert(out, wide_out);
}
}  // namespace

grad_sync::grad_sync(std::vector<synced_chunk> chunks, grad_sync_options options, comm::communicator* data_parallel,
                     comm::communicator* embedding, step_timers& timers, stage_activity& activity,
                     comm::communicator* shard_group, comm::communicator* instances)
    : chunks_(std::move(chunks)), options_(options), data_parallel_(data_parallel),
      shard_group_(shard_group || instances ? shard_group : data_parallel), instances_(instances), embedding_(embedding),
      timers_(timers), activity_(activity) {
  const int dp = data_parallel_ ? data_parallel_->size() : 1;
  const int shards = shard_group_ ? shard_group_->size() : 1;
  if (options_.distributed_optimizer && shards > 1) {
    // Megatron's distributed optimizer: the flat buffer, padded to a multiple of the shard
    // group's size, split evenly.
    const auto dp_rank = static_cast<std::size_t>(shard_group_->rank());
    for (const auto& c : chunks_) {
      auto& s = shards_.emplace_back();
      s.numel = static_cast<std::size_t>(c.grads.numel());
      s.padded = (s.numel + shards - 1) / shards * shards;
      s.begin = s.padded / shards * dp_rank;
      s.end = s.begin + s.padded / shards;
      const auto type = c.grads.type;
      s.grads = tensor::tensor({static_cast<std::int64_t>(s.end - s.begin)}, type, tensor::memory_kind::gradients);
      s.scratch = tensor::tensor({static_cast<std::int64_t>(s.padded)}, type, tensor::memory_kind::communication);
      // A 16-bit model gathers its 16-bit values: a buffer of their dtype beside the fp32 scratch.
      if (c.values.type != type)
        s.gathered = tensor::tensor({static_cast<std::int64_t>(s.padded)}, c.values.type,
                                    tensor::memory_kind::communication);
    }
  }
  if (options_.overlap_grad_reduce && dp > 1)
    build_buckets(shards_.empty() ? options_.bucket_size : std::numeric_limits<std::int64_t>::max());
  if (!buckets_.empty() || (options_.overlap_param_gather && !shards_.empty()))
    background_ = std::make_unique<comm_worker>();
}

grad_sync::shard* grad_sync::shard_of(std::size_t chunk) {
  return shards_.empty() ? nullptr : &shards_[chunk];
}

void grad_sync::build_buckets(std::int64_t bucket_size) {
  // The last chunk's last backward comes first (the interleaved schedule's cooldown runs the
  // chunks in reverse): its buckets come first.
  for (std::size_t c = chunks_.size(); c-- > 0;) {
    const auto& chunk = chunks_[c];
    std::vector<std::size_t> order(chunk.params.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Backward finishes the parameters roughly in reverse order of registration: bucket from the end.
    std::sort(order.begin(), order.end(),
              [&](std::size_t x, std::size_t y) { return chunk.params[x].offset > chunk.params[y].offset; });
    bucket b;
    b.chunk = c;
    b.end = b.begin = static_cast<std::size_t>(chunk.grads.numel());
    b.ready_event = std::numeric_limits<int>::max();
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto& p = chunk.params[order[i]];
      if (p.offset + p.numel != b.begin)
        throw std::logic_error("gradient buffer of chunk " + std::to_string(c) + " is not contiguous");
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

void grad_sync::reduce_tied_embedding(std::size_t chunk, const synced_param& p) {
  const auto n = static_cast<std::int64_t>(p.offset);
  const trace_recorder::scope traced(*trace_, "embedding grads all-reduce", "grad_sync",
                                     {{"chunk", static_cast<std::int64_t>(chunk)},
                                      {"bytes", static_cast<std::int64_t>(p.numel * tensor::size_of(chunks_[chunk].grads.type))}});
  all_reduce_in(*embedding_, chunks_[chunk].grads.rows(n, n + static_cast<std::int64_t>(p.numel)));
}

// One bucket's share of finish_grad_sync, on the background thread: the tied embedding's
// cross-stage sum, then the data-parallel mean.
void grad_sync::reduce_bucket(const bucket& b) {
  if (options_.check_for_large_grads) record_local_norm(b.chunk, b.begin, b.end);
  if (b.tied_embedding) reduce_tied_embedding(b.chunk, chunks_[b.chunk].params[*b.tied_embedding]);
  reduce_over_replicas(b.chunk, b.begin, b.end);
}

// Megatron's DDP: scale by 1/dp, then sum over the replicas, so every replica holds the mean of
// grads [begin, end) of chunk c (all of it with the distributed optimizer, whose reduce-scatter
// leaves this rank's shard of the sum in shards_[c].grads); with --calculate-per-token-loss the
// plain sum.
void grad_sync::reduce_over_replicas(std::size_t c, std::size_t begin, std::size_t end) {
  auto grads = chunks_[c].grads.rows(static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end));
  const trace_recorder::scope traced(*trace_, shards_.empty() ? "data-parallel grads all-reduce" : "data-parallel grads reduce-scatter",
                                     "grad_sync",
                                     {{"chunk", static_cast<std::int64_t>(c)},
                                      {"bytes", static_cast<std::int64_t>(grads.nbytes())},
                                      {"group_size", data_parallel_->size()}});
  if (!options_.sum_over_replicas) kernels::scale(grads, 1.0 / data_parallel_->size());
  if (shards_.empty()) {
    all_reduce_in(*data_parallel_, grads);
    return;
  }
  auto& s = shards_[c];
  if (begin != 0 || end != s.numel) throw std::logic_error("the distributed optimizer reduces whole chunks");
  const auto numel = static_cast<std::int64_t>(s.numel);
  kernels::copy(s.scratch.view().rows(0, numel), grads);
  kernels::fill_zero(s.scratch.view().rows(numel, static_cast<std::int64_t>(s.padded)));
  reduce_scatter_in(*shard_group_, s.scratch.view(), s.grads.view());
  // Partial sharding: each instance reduced its replicas' part; the instances' shards are summed.
  if (instances_) all_reduce_in(*instances_, s.grads.view());
}

void grad_sync::backward_progress(int chunk, int event) {
  while (next_bucket_ < buckets_.size()) {
    const auto& b = buckets_[next_bucket_];
    if (event != post_everything && (static_cast<int>(b.chunk) != chunk || b.ready_event < event)) return;
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
  std::span<const float> values;
  if (rows.type == tensor::dtype::float32) {
    values = rows.host<float>();
  } else {
    wide = tensor::tensor({static_cast<std::int64_t>(end - begin)}, tensor::dtype::float32, tensor::memory_kind::communication);
    kernels::convert(wide.view(), rows);
    values = wide.host<float>();
  }
  double sum = 0;
  for (const float v : values) sum += static_cast<double>(v) * v;
  local_norms_.push_back(static_cast<float>(std::sqrt(sum)));  // Megatron's norm is an fp32 tensor
}

void grad_sync::record_local_grad_norms() {
  if (!options_.check_for_large_grads || overlapped()) return;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const auto numel = static_cast<std::size_t>(chunks_[c].grads.numel());
    const synced_param* tied = nullptr;
    if (options_.distributed_optimizer && embedding_)
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
    if (embedding_)
      for (std::size_t c = 0; c < chunks_.size(); ++c)
        for (const auto& p : chunks_[c].params)
          if (p.tied_embedding) reduce_tied_embedding(c, p);
  }
  const auto timed = timers_.time(step_timer::all_grads_sync);
  if (!data_parallel_) return;
  for (std::size_t c = 0; c < chunks_.size(); ++c)
    reduce_over_replicas(c, 0, static_cast<std::size_t>(chunks_[c].grads.numel()));
}

void grad_sync::gather_params(std::size_t c) {
  auto& s = shards_[c];
  auto values = chunks_[c].values;
  const auto begin = static_cast<std::int64_t>(s.begin), end = static_cast<std::int64_t>(s.end);
  const auto numel = static_cast<std::int64_t>(s.numel);
  tensor::tensor mine({end - begin}, values.type, tensor::memory_kind::communication);
  if (begin < numel) kernels::copy(mine.view().rows(0, std::min(end, numel) - begin), values.rows(begin, std::min(end, numel)));
  auto& gathered = s.gathered.defined() ? s.gathered : s.scratch;
  const trace_recorder::scope traced(*trace_, "data-parallel params all-gather", "grad_sync",
                                     {{"chunk", static_cast<std::int64_t>(c)},
                                      {"bytes", static_cast<std::int64_t>(gathered.nbytes())},
                                      {"group_size", shard_group_->size()}});
  shard_group_->all_gather(mine.view(), gathered.view());
  kernels::copy(values, gathered.view().rows(0, numel));
}

void grad_sync::start_param_sync() {
  if (shards_.empty()) return;
  const bool overlap = options_.overlap_param_gather && background_;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    if (overlap)
      background_->post([this, c] { gather_params(c); });
    else
      gather_params(c);
  }
  params_pending_ = overlap;
}

void grad_sync::wait_param_sync() {
  if (!params_pending_) return;
  wait_background("the overlapped parameter all-gather");
  params_pending_ = false;
}

}  // namespace mactor::training
