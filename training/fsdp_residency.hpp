// Fully sharded data parallelism on the distributed optimizer's shards (Megatron FSDP's
// optim_grads and optim_grads_params, torch FSDP2): with sharded parameters (ZeRO-3) each rank
// keeps only its shard of every chunk's values, and the whole values exist in a gather buffer
// only around the chunk's forward and backward; with sharded gradients (ZeRO-2) the whole
// gradients exist only from the compute that first accumulates into them to the end of the next
// backward, which reduce-scatters them into the shard and frees them.
#pragma once

#include <cstddef>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "tensor/tensor.hpp"
#include "config/data_parallel_sharding.hpp"
#include "training/grad_sync.hpp"

namespace mactor::training {

class fsdp_residency {
 public:
  /// Shards each chunk's values (ZeRO-3) and drops its gradient buffer, along grad sync's
  /// distributed-optimizer shards (which must exist: more than one data-parallel rank).
  /// The chunks and grad sync must outlive this.
  fsdp_residency(std::vector<model::gpt_chunk>& chunks, grad_sync& sync, config::sharding_plan plan);

  /// Before chunk's forward or backward: its whole parameters gathered (ZeRO-3) and, when the
  /// compute accumulates gradients (`grads`), a whole gradient buffer (ZeRO-2).
  void before_compute(int chunk, bool grads);
  /// After chunk's forward: the gathered parameters freed (unless FSDP2's
  /// --torch-fsdp2-no-reshard-after-forward keeps them for the backward).
  void after_forward(int chunk);
  /// After chunk's backward: its gradients reduce-scattered into the shard and freed, and the
  /// gathered parameters freed.
  void after_backward(int chunk);
  /// The end of a schedule: whatever is still held is freed (gradients must have been reduced).
  void release_all();
  /// The start of a training step: the shard's gradients at zero.
  void zero_grads();

 private:
  void release_values(std::size_t chunk);
  tensor::tensor take_buffer(std::int64_t numel, tensor::dtype type);

  std::vector<model::gpt_chunk>& chunks_;
  grad_sync& sync_;
  config::sharding_plan plan_;
  struct held {
    tensor::tensor values, grads;  // the whole (padded) buffers while held, else undefined
  };
  std::vector<held> held_;
  std::vector<tensor::tensor> spare_;  // --fsdp-double-buffer: up to two freed gather buffers
};

}  // namespace mactor::training
