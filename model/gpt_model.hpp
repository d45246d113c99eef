// Megatron-Core's GPTModel (local spec, pre-norm, [seq, batch, hidden] activations): embedding,
// transformer layers, final norm, output layer and vocab-parallel cross-entropy, for one
// tensor-parallel rank: the whole model as one pipeline chunk. Forward and backward run together
// per micro-batch; gradients accumulate.
#pragma once
#include <cstdint>
#include <vector>

#include "model/gpt_chunk.hpp"

namespace mactor::model {

class gpt_model {
 public:
  /// Throws std::invalid_argument listing every config problem, or when the group's size and
  /// rank differ from the config's tensor-parallel size and rank.
  gpt_model(const gpt_model_config& config, group& tp);

  /// Forward and backward of one micro-batch. Accumulates into the grads the gradient of
  /// grad_scale * loss_sum (Megatron passes 1 / (num_tokens * num_microbatches) unless
  /// --calculate-per-token-loss). Dropout is on; each call draws fresh masks.
  loss_and_count forward_backward(const micro_batch& batch, double grad_scale);
  /// Forward only (evaluation); dropout off unless asked, gradients untouched.
  loss_and_count forward_only(const micro_batch& batch, bool apply_dropout = false);

  /// With sequence parallelism, sums the norm and row-parallel-bias gradients over the group;
  /// call once after the last forward_backward of a step (see gpt_chunk).
  void all_reduce_sequence_parallel_grads() { chunk_.all_reduce_sequence_parallel_grads(); }
  std::vector<parameter>& parameters() { return chunk_.parameters(); }
  parameter_store& store() { return chunk_.store(); }
  /// The MoE routers in layer order (their expert biases: gpt_chunk::moe_routers).
  std::vector<moe_router*> moe_routers() { return chunk_.moe_routers(); }
  void zero_grad() { chunk_.zero_grad(); }
  /// Each multi-token prediction depth's masked mean loss summed over the training forwards
  /// since the last call (gpt_chunk::take_mtp_losses).
  std::vector<double> take_mtp_losses() { return chunk_.take_mtp_losses(); }
  /// gpt_chunk::set_mtp_loss_scale.
  void set_mtp_loss_scale(double scale, bool per_token) { chunk_.set_mtp_loss_scale(scale, per_token); }
  const gpt_model_config& config() const { return chunk_.config(); }
  /// The dropout mask generation; forward_backward advances it by one.
  std::uint64_t dropout_step() const { return step_; }
  void set_dropout_step(std::uint64_t step) { step_ = step; }

 private:
  gpt_chunk chunk_;
  std::uint64_t step_ = 0;
};

}  // namespace mactor::model
