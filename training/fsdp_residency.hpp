// Fully sharded data parallelism on the distributed optimizer's shards (Megatron FSDP's
// optim_grads and optim_grads_params, torch FSDP2): with sharded parameters (ZeRO-3) each rank
// keeps only its shard of every chunk's values, and each FSDP unit's whole values exist only
// around that unit's compute (training/fsdp_units.hpp: gathered per unit, the next prefetched);
// with sharded gradients (ZeRO-2 and ZeRO-3) each unit's whole gradients exist only from the
// compute that first writes them to the end of that unit's backward, when they are
// reduce-scattered into the shard and freed (training/fsdp_unit_grads.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "config/data_parallel_sharding.hpp"
#include "model/gpt_chunk.hpp"
#include "training/comm_worker.hpp"
#include "training/fsdp_unit_grads.hpp"
#include "training/fsdp_units.hpp"
#include "training/grad_sync.hpp"

namespace mactor::training {

class fsdp_residency {
 public:
  /// Shards each chunk's values (ZeRO-3: or holds only the shard from the start, for a chunk
  /// only laid out under --init-model-with-meta-device) and drops its gradient buffer, along
  /// grad sync's distributed-optimizer shards (which must exist: more than one data-parallel
  /// rank). The chunks and grad sync must outlive this.
  fsdp_residency(std::vector<model::gpt_chunk>& chunks, grad_sync& sync, config::sharding_plan plan);
  ~fsdp_residency();
  fsdp_residency(const fsdp_residency&) = delete;
  fsdp_residency& operator=(const fsdp_residency&) = delete;

  /// Before chunk's forward or backward: the values come unit by unit as the chunk asks
  /// (ZeRO-3), and so do the gradient buffers.
  void before_compute(int chunk, bool forward);
  /// After chunk's forward: its gathered units freed (unless FSDP2's
  /// --torch-fsdp2-no-reshard-after-forward keeps them for the backward).
  void after_forward(int chunk);
  /// After chunk's backward: its gradients still held reduce-scattered into the shard, every
  /// reduction finished, and its gathered units freed.
  void after_backward(int chunk);
  /// The end of a schedule: whatever is still held is freed (gradients must have been reduced).
  void release_all();
  /// The start of a training step: the shard's gradients at zero.
  void zero_grads();

 private:
  std::vector<model::gpt_chunk>& chunks_;
  grad_sync& sync_;
  config::sharding_plan plan_;
  fsdp_buffers buffers_;
  std::unique_ptr<comm_worker> worker_;  // the gathers and the gradient reductions, in posting order
  std::vector<std::unique_ptr<fsdp_units>> units_;  // ZeRO-3, per chunk
  std::vector<std::unique_ptr<fsdp_unit_grads>> grads_;  // per chunk
};

}  // namespace mactor::training
