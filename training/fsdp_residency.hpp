// Fully sharded data parallelism on the distributed optimizer's shards (Megatron FSDP's
// optim_grads and optim_grads_params, torch FSDP2): with sharded parameters (ZeRO-3) each rank
// keeps only its shard of every chunk's values, and each FSDP unit's whole values exist only
// around that unit's compute (training/fsdp_units.hpp: gathered per unit, the next prefetched);
// with sharded gradients (ZeRO-2) the whole gradients exist only from the compute that first
// accumulates into them to the end of the next backward, which reduce-scatters them into the
// shard and frees them.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "config/data_parallel_sharding.hpp"
#include "model/gpt_chunk.hpp"
#include "tensor/tensor.hpp"
#include "training/comm_worker.hpp"
#include "training/fsdp_units.hpp"
#include "training/grad_sync.hpp"

namespace mactor::training {

class fsdp_residency {
 public:
  /// Shards each chunk's values (ZeRO-3) and drops its gradient buffer, along grad sync's
  /// distributed-optimizer shards (which must exist: more than one data-parallel rank).
  /// The chunks and grad sync must outlive this.
  fsdp_residency(std::vector<model::gpt_chunk>& chunks, grad_sync& sync, config::sharding_plan plan);
  ~fsdp_residency();
  fsdp_residency(const fsdp_residency&) = delete;
  fsdp_residency& operator=(const fsdp_residency&) = delete;

  /// Before chunk's forward or backward: when the compute accumulates gradients (`grads`), a
  /// whole gradient buffer (ZeRO-2); the values come unit by unit as the chunk asks (ZeRO-3).
  void before_compute(int chunk, bool forward, bool grads);
  /// After chunk's forward: its gathered units freed (unless FSDP2's
  /// --torch-fsdp2-no-reshard-after-forward keeps them for the backward).
  void after_forward(int chunk);
  /// After chunk's backward: its gradients reduce-scattered into the shard and freed, and its
  /// gathered units freed.
  void after_backward(int chunk);
  /// The end of a schedule: whatever is still held is freed (gradients must have been reduced).
  void release_all();
  /// The start of a training step: the shard's gradients at zero.
  void zero_grads();

 private:
  std::vector<model::gpt_chunk>& chunks_;
  grad_sync& sync_;
  config::sharding_plan plan_;
  std::vector<tensor::tensor> grads_;  // per chunk: the whole (padded) gradients while held
  fsdp_buffers buffers_;
  std::vector<std::unique_ptr<fsdp_units>> units_;  // ZeRO-3, per chunk
  // Declared after the units whose buffers its gathers fill: destroyed (joined) first.
  std::unique_ptr<comm_worker> worker_;
};

}  // namespace mactor::training
