// FSDP's sharded gradients unit by unit (Megatron FSDP's per-module reduce-scatter): a chunk's
// unit (model/parameter_units.hpp) gets a gradient buffer when a compute first writes its
// gradients, and as soon as its backward is over the buffer is reduce-scattered into the shard on
// the collective thread and freed. At most the units a compute is in and one whose reduction is
// on its way hold whole gradients, not the chunk: a unit's buffer waits for the older reductions. The embedding's unit, which the output
// layer's backward may write too (a shared word table), is reduced at the end of the backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <future>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "model/parameter_units.hpp"
#include "tensor/tensor.hpp"
#include "training/comm_worker.hpp"
#include "training/fsdp_units.hpp"
#include "training/grad_sync.hpp"

namespace mactor::training {

class fsdp_unit_grads final : public model::parameter_units {
 public:
  /// Chunk `index` of grad sync; reductions go to `worker` (in posting order, the same on every
  /// rank); `gathers` (ZeRO-3's fsdp_units, or null) is told of every use and done first. The
  /// chunk, sync, worker and gathers must outlive this.
  fsdp_unit_grads(model::gpt_chunk& chunk, std::size_t index, grad_sync& sync, comm_worker& worker,
                  model::parameter_units* gathers);

  void use(int unit, bool forward) override;
  void done(int unit, bool forward) override;
  void grads_needed(int unit) override;
  /// After the chunk's backward: what is still held (the embedding's unit) posted for reduction.
  void after_backward();
  /// True while some unit holds gradients not yet posted for reduction.
  bool holds_grads() const;
  /// Waits for every posted reduction; rethrows the first failure.
  void finish_reductions();

 private:
  struct unit_state : unit_layout {
    tensor::tensor grads;  // while held
  };
  void hold(int unit);
  void reduce(int unit);

  model::gpt_chunk& chunk_;
  std::size_t index_;
  grad_sync& sync_;
  comm_worker& worker_;
  model::parameter_units* gathers_;
  std::vector<unit_state> units_;
  std::deque<std::shared_future<void>> reducing_;  // posted reductions, oldest first
};

}  // namespace mactor::training
