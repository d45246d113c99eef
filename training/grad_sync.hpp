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
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "tensor/tensor.hpp"
#include "training/comm_worker.hpp"
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
};

/// One model chunk's flat parameter and gradient buffers and the parameters in them.
struct synced_chunk {
  tensor::tensor_view values, grads;
  std::vector<synced_param> params;
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
  /// --check-for-large-grads: each bucket's local gradient norm is kept (Megatron's check_grads).
  bool check_for_large_grads = false;
};

class grad_sync {
 public:
  /// `data_parallel` and `embedding` may be null (a group of one). Throws std::logic_error for
  /// a chunk whose parameters do not tile its gradient buffer. With
  /// --num-distributed-optimizer-instances the distributed optimizer shards over `shard_group`
  /// (one instance's part of data_parallel, null for one rank) and sums each shard over
  /// `instances` (the same shard in every instance); both default to data_parallel and none.
  grad_sync(std::vector<synced_chunk> chunks, grad_sync_options options, comm::communicator* data_parallel,
            comm::communicator* embedding, step_timers& timers, stage_activity& activity,
            comm::communicator* shard_group = nullptr, comm::communicator* instances = nullptr);

  /// The distributed optimizer's slice of a chunk: [begin, end) of its (padded) flat buffer,
  /// and the reduced gradients of that slice.
  struct shard {
    std::size_t numel = 0, padded = 0, begin = 0, end = 0;
    tensor::tensor grads;    ///< reduce-scattered gradients of [begin, end)
    tensor::tensor scratch;  ///< the padded buffer the collectives run on
    /// The padded buffer the parameter all-gather fills when the values' dtype is not the
    /// gradients' (a 16-bit model); undefined otherwise (the scratch serves).
    tensor::tensor gathered;
  };
  /// Null without the distributed optimizer.
  shard* shard_of(std::size_t chunk);

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
  /// --profile: each collective (and each wait for the background ones) is also a span there.
  void trace_into(trace_recorder* trace) { trace_ = trace; }

 private:
  struct bucket {
    std::size_t chunk = 0, begin = 0, end = 0;
    int ready_event = 0;
    std::optional<std::size_t> tied_embedding;  // the tied embedding's parameter index
  };
  void build_buckets(std::int64_t bucket_size);
  void reduce_bucket(const bucket& b);
  void reduce_tied_embedding(std::size_t chunk, const synced_param& p);
  void reduce_over_replicas(std::size_t chunk, std::size_t begin, std::size_t end);
  void gather_params(std::size_t chunk);
  void record_local_norm(std::size_t chunk, std::size_t begin, std::size_t end);
  void wait_background(const char* why);

  std::vector<synced_chunk> chunks_;
  grad_sync_options options_;
  comm::communicator* data_parallel_;
  comm::communicator* shard_group_;  // the distributed optimizer's shards: data_parallel_ or one instance's part
  comm::communicator* instances_;    // the other instances' ranks holding the same shard, or null
  comm::communicator* embedding_;
  step_timers& timers_;
  stage_activity& activity_;
  std::vector<shard> shards_;
  std::vector<bucket> buckets_;
  std::size_t next_bucket_ = 0;
  std::unique_ptr<comm_worker> background_;
  bool params_pending_ = false;
  std::vector<double> local_norms_;  // --check-for-large-grads
  trace_recorder* trace_ = &no_trace();
};

}  // namespace mactor::training
