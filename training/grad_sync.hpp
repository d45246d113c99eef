// Gradient and parameter synchronisation over the data-parallel group, as Megatron-Core's DDP
// and distributed optimizer do it: gradient buckets reduced (all-reduce, or reduce-scatter into
// this rank's shard with the distributed optimizer), the tied embedding's gradient summed between
// the first and last stage, and the distributed optimizer's parameter all-gather; with
// --overlap-grad-reduce / --overlap-param-gather both run on a background collective thread.
// The engine calls it through hooks in the way Megatron-Core hands its schedules
// grad_sync_func / param_sync_func / finalize_model_grads_func.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <atomic>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "tensor/tensor.hpp"
#include "training/comm_worker.hpp"
#include "training/packed_param_gather.hpp"
#include "training/stage_activity.hpp"
#include "training/step_timers.hpp"
#include "training/trace_recorder.hpp"

namespace mactor::training {

/// One parameter in its chunk's flat buffers, as grad sync sees it.
struct synced_param {
  std::size_t offset = 0, numel = 0;
  /// The backward progress event after which its gradient is complete (see gpt_chunk::backward).
  int ready_event = 0;
  /// The tied word embedding (or the last stage's copy of it): summed across stages first.
  bool tied_embedding = false;
  /// Its FSDP unit (model/parameter_units.hpp): with sharded parameters each unit's part of a
  /// region is a region of its own, gathered alone.
  int unit = 0;
};

/// One model chunk's flat parameter and gradient buffers and the parameters in them. The MoE
/// experts, when there are any, fill the end of the buffers, from expert_begin.
struct synced_chunk {
  tensor::tensor_view values, grads;
  std::vector<synced_param> params;
  std::size_t expert_begin = std::numeric_limits<std::size_t>::max();  // none
};

struct grad_sync_options {
  bool distributed_optimizer = false;  ///< shard gradients and optimizer over the replicas
  bool overlap_grad_reduce = false;    ///< reduce buckets during the last backward
  bool overlap_param_gather = false;   ///< all-gather parameters in the background
  /// Elements per bucket with overlap_grad_reduce (the distributed optimizer shards whole
  /// chunks here, so a chunk is its one bucket then).
  std::int64_t bucket_size = 0;
  /// Megatron DDP's gradient_scaling_factor: 1/dp (the replicas' mean), or 1 (their sum) with
  /// --calculate-per-token-loss, whose 1/tokens comes at finalize.
  bool sum_over_replicas = false;
  /// --expert-model-parallel-size > 1: the experts' gradients reduce (and shard) over the
  /// expert-data-parallel group instead of the data-parallel one, still scaled by 1/dp
  /// (Megatron DDP's expert_gradient_scaling_factor).
  bool expert_parallel = false;
  /// --check-for-large-grads: each bucket's local gradient norm is kept (Megatron's check_grads).
  bool check_for_large_grads = false;
  /// FSDP's optim_grads (ZeRO-2): the engine reduce-scatters each backward's gradients into the
  /// shard, unit by unit (reduce_unit_into_shard); finish_grad_sync has nothing left to reduce.
  bool shard_grads = false;
  /// FSDP's optim_grads_params (ZeRO-3): the engine gathers a chunk's parameters before each
  /// compute (gather_values); start_param_sync has nothing to gather.
  bool shard_params = false;
  /// ZB-V's V placement: the embedding (chunk 0) and the output layer's copy of a tied embedding
  /// (chunk 1) are on this rank, so their sum is taken here instead of over an embedding group.
  /// Not with overlap_grad_reduce (the copy's bucket would go before the embedding's gradient
  /// is complete; config refuses the combination).
  bool local_tied_embedding = false;
};

class grad_sync {
 public:
  /// `data_parallel` and `embedding` may be null (a group of one). Throws std::logic_error for
  /// a chunk whose parameters do not tile its gradient buffer. With
  /// --num-distributed-optimizer-instances the distributed optimizer shards over `shard_group`
  /// (one instance's part of data_parallel, null for one rank) and sums each shard over
  /// `instances` (the same shard in every instance); both default to data_parallel and none.
  /// With options.expert_parallel, the experts' part of each chunk reduces over
  /// `expert_data_parallel` (null: this rank alone holds its experts); with several instances its
  /// shards are over `expert_shard_group` (one instance's part of it, null for one rank), summed
  /// over the same `instances` (Megatron's one inter-instance group); without, over all of it.
  grad_sync(std::vector<synced_chunk> chunks, grad_sync_options options, comm::communicator* data_parallel,
            comm::communicator* embedding, step_timers& timers, stage_activity& activity,
            comm::communicator* shard_group = nullptr, comm::communicator* instances = nullptr,
            comm::communicator* expert_data_parallel = nullptr, comm::communicator* expert_shard_group = nullptr);

  /// The distributed optimizer's part of a chunk: a slice of each region of its flat buffer
  /// (the dense parameters' over the data-parallel group; the experts', with expert
  /// parallelism, over the expert-data-parallel group), and their reduced gradients.
  struct shard {
    /// Elements [begin, end) of the chunk's flat buffer, at grads[at ...).
    struct range {
      std::size_t begin = 0, end = 0, at = 0;
    };
    std::vector<range> ranges;
    tensor::tensor grads;  ///< reduce-scattered gradients of every range (and their padding)
  };
  /// Null without the distributed optimizer.
  shard* shard_of(std::size_t chunk);
  /// FSDP, unit by unit: the length of the buffer chunk's unit gathers into and reduces from
  /// (its regions, each padded, one after another), the place of flat element `flat` of the
  /// unit there, and (ZeRO-3) the gather itself from every member's shard (`shard` laid out as
  /// shard_of(chunk)).
  std::size_t unit_length(std::size_t chunk, int unit) const;
  std::size_t unit_place(std::size_t chunk, int unit, std::size_t flat) const;
  /// `prefetched`: posted ahead of the unit's use (a trace argument).
  void gather_unit(std::size_t chunk, int unit, tensor::const_tensor_view shard, tensor::tensor_view full,
                   bool prefetched = false);
  /// FSDP's sharded gradients: one backward's gradients of chunk's `unit` (`grads`, laid out as
  /// the unit's gather buffer, zero padding), scaled as finish_grad_sync would, each region
  /// reduce-scattered over its own shard group (the experts' over the expert-data-parallel one)
  /// in place and added to the shard's gradients.
  void reduce_unit_into_shard(std::size_t chunk, int unit, tensor::tensor_view grads);
  /// FSDP: the shard's gradients start the step at zero.
  void zero_shard_grads();

  /// grad_sync_func: during the last micro-batch's backward, `chunk` has finished `event`:
  /// posts (in the same order on every replica) each bucket that is now complete.
  void backward_progress(int chunk, int event);
  /// --check-for-large-grads, before anything reduces the gradients (the start of finalize): the
  /// L2 norm of each bucket's local gradients, as Megatron's check_grads takes it at the start
  /// of each bucket's data-parallel collective. One bucket per chunk, or with the distributed
  /// optimizer and a tied embedding across stages, the embedding in a bucket of its own (Megatron's
  /// buffer). Overlapped buckets are measured as they are posted instead.
  void record_local_grad_norms();
  /// The norms recorded since the last call, in the order the buckets were measured.
  std::vector<double> take_local_grad_norms() { return std::exchange(local_norms_, {}); }
  /// True when gradients are reduced in buckets during the backward (--overlap-grad-reduce).
  bool overlapped() const { return !buckets_.empty(); }
  std::size_t num_buckets() const { return buckets_.size(); }
  /// finish_grad_sync: every gradient reduced, each replica holding the data-parallel mean
  /// (of its shard, with the distributed optimizer) and the tied embedding the cross-stage sum.
  void finish_grad_sync();
  /// After the optimizer step: every replica gets the updated slices of every other (the
  /// distributed optimizer's all-gather), in the background with --overlap-param-gather.
  void start_param_sync();
  /// param_sync_func: waits for a background parameter all-gather, if one is running.
  void wait_param_sync();
  /// --fp8-param-gather: chunk c's weights at `weights` are held as fp8 in `bytes`, and its
  /// model values are now `values`, which hold every other parameter packed in flat order; the
  /// parameter all-gather moves the fp8 bytes (1 per element) and those values.
  void gather_fp8(std::size_t chunk, tensor::tensor_view values, std::uint8_t* bytes,
                  std::vector<fp8_weight_place> weights);
  /// The distributed optimizer's shard group, or null when it does not shard (one rank).
  comm::communicator* shard_group() const { return shards_.empty() ? nullptr : shard_group_; }
  /// Bytes this rank received from the parameter all-gathers since the last call (every
  /// member's payload, padding included), and resets the count.
  std::size_t take_param_gather_bytes() { return param_gather_bytes_.exchange(0); }
  /// --profile: each collective (and each wait for the background ones) is also a span there.
  void trace_into(trace_recorder* trace) { trace_ = trace; }
  trace_recorder& trace() const { return *trace_; }

 private:
  /// A part of a chunk's flat buffer that reduces over one group: the whole chunk, or with
  /// expert parallelism its dense parameters and its experts.
  struct region {
    std::size_t chunk = 0, begin = 0, end = 0;
    int unit = -1;  // with sharded parameters, the FSDP unit it belongs to
    comm::communicator* group = nullptr;        // the replicas summed (null: none)
    comm::communicator* shard_group = nullptr;  // the distributed optimizer's shards (null: one)
    comm::communicator* instances = nullptr;    // the other instances holding the same shard
    // The distributed optimizer: the padded region, this rank's slice [lo, hi) of it, its place
    // in the chunk's shard gradients, the padded buffer the collectives run on, and (a 16-bit
    // model) the one the parameter all-gather fills in the values' dtype.
    std::size_t padded = 0, lo = 0, hi = 0, at = 0;
    tensor::tensor scratch, gathered;
  };
  struct bucket {
    std::size_t region = 0, begin = 0, end = 0;
    int ready_event = 0;
    std::optional<std::size_t> tied_embedding;  // the tied embedding's parameter index
  };
  void build_regions();
  void build_shards();
  void build_buckets(std::int64_t bucket_size);
  void reduce_bucket(const bucket& b);
  void reduce_tied_embedding(std::size_t chunk, const synced_param& p);
  /// The same with FSDP's sharded gradients: this rank's shard holds its slice of the
  /// data-parallel reduced gradient; the whole one is assembled over the shard group, summed
  /// over the embedding group, and the slice taken back.
  void reduce_sharded_tied_embedding(std::size_t chunk, const synced_param& p);
  struct sharded_slice {
    std::int64_t shard = 0, whole = 0, n = 0;  // places in the shard's gradients and in p; length
    const struct region* region = nullptr;
  };
  sharded_slice slice_of(std::size_t chunk, const synced_param& p) const;
  /// p's whole gradient from the members' slices (collective over its region's shard group).
  tensor::tensor whole_sharded_grad(std::size_t chunk, const synced_param& p);
  /// This rank's slice of `whole` back into its shard.
  void keep_sharded_slice(std::size_t chunk, const synced_param& p, const tensor::tensor& whole);
  /// local_tied_embedding: both copies' gradients become their sum (what the embedding group's
  /// all-reduce of two ranks gives).
  void sum_local_tied_embedding();
  bool shares_embedding() const { return embedding_ != nullptr || options_.local_tied_embedding; }
  void reduce_over_replicas(std::size_t region, std::size_t begin, std::size_t end);
  void gather_params(std::size_t region);
  void gather_packed(std::size_t region);
  void record_local_norm(std::size_t chunk, std::size_t begin, std::size_t end);
  void wait_background(const char* why);

  std::vector<synced_chunk> chunks_;
  grad_sync_options options_;
  comm::communicator* data_parallel_;
  comm::communicator* shard_group_;  // the distributed optimizer's shards: data_parallel_ or one instance's part
  comm::communicator* instances_;    // the other instances' ranks holding the same shard, or null
  comm::communicator* expert_data_parallel_;
  comm::communicator* expert_shard_group_;  // the experts' shards: expert_data_parallel_ or one instance's part
  comm::communicator* embedding_;
  std::vector<region> regions_;
  step_timers& timers_;
  stage_activity& activity_;
  std::vector<shard> shards_;
  std::vector<bucket> buckets_;
  std::size_t next_bucket_ = 0;
  struct fp8_chunk {
    std::uint8_t* bytes = nullptr;
    std::vector<fp8_weight_place> weights;
  };
  std::vector<fp8_chunk> fp8_;  // per chunk with --fp8-param-gather, else empty
  std::atomic<std::size_t> param_gather_bytes_{0};
  // Declared after everything its jobs use: destroyed (joined) first.
  std::unique_ptr<comm_worker> background_;
  bool params_pending_ = false;
  std::vector<double> local_norms_;  // --check-for-large-grads
  trace_recorder* trace_ = &no_trace();
};

}  // namespace mactor::training
