// fp32 main gradients beside a bf16 gradient buffer (--grad-reduce-in-bf16, or --bf16 with
// --main-grads-dtype bf16): the backward accumulates and the data-parallel group reduces in bf16,
// then, as Megatron's optimizer copies each model-grad shard into its fp32 main param's .grad
// (TE's FusedAdam widens its decoupled_grad in the kernel, the same values), the reduced
// gradients are widened here for clipping, loss unscaling and the update. One fp32 buffer per
// chunk over the range this rank's optimizer updates (its distributed-optimizer shard, or the
// whole chunk). With an fp32 (or fp64) gradient buffer there is no copy.
#pragma once

#include <cstddef>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "tensor/tensor.hpp"
#include "training/grad_sync.hpp"

namespace mactor::training {

class main_grads {
 public:
  /// The chunks and grad sync must outlive this.
  main_grads(std::vector<model::gpt_chunk>& chunks, grad_sync& sync);

  /// True when the gradient buffers are 16-bit and the optimizer reads fp32 copies.
  bool separate() const { return !copies_.empty(); }
  /// Chunk c's fp32 main gradients from the first element of its optimizer range (the shard's
  /// begin with the distributed optimizer, else 0), in the model's device memory.
  float* values(std::size_t c);
  /// Widens the reduced gradients into the copies (after grad sync's finish_grad_sync).
  void copy_from_model();

 private:
  std::vector<model::gpt_chunk>& chunks_;
  grad_sync& sync_;
  std::vector<tensor::tensor> copies_;  // per chunk, fp32, when separate
};

}  // namespace mactor::training
