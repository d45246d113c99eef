// Megatron-Core's GPTModel (local spec, pre-norm, [seq, batch, hidden] activations): embedding,
// transformer layers, final norm, output layer and vocab-parallel cross-entropy, for one
// tensor-parallel rank. Forward and backward run together per micro-batch; gradients accumulate.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/language_model_embedding.hpp"
#include "model/norm.hpp"
#include "model/output_layer_loss.hpp"
#include "model/parameter.hpp"
#include "model/transformer_layer.hpp"

namespace mactor::model {

/// One micro-batch, every array [micro_batch_size, seq_length] row-major as Megatron's batch.
struct micro_batch {
  const std::int32_t* tokens = nullptr;
  const std::int32_t* labels = nullptr;
  const float* loss_mask = nullptr;
  const std::int32_t* position_ids = nullptr;  // null: 0..seq-1 (used by learned positions only)
  int micro_batch_size = 1;
};

/// Megatron's loss reduction pair: sum of loss * mask and sum of mask.
struct loss_and_count {
  double loss_sum = 0;
  double num_tokens = 0;
};

template <typename T>
class gpt_model {
 public:
  /// Throws std::invalid_argument listing every config problem, or when the group's size and
  /// rank differ from the config's tensor-parallel size and rank.
  gpt_model(const gpt_model_config& config, group& tp);

  /// Forward and backward of one micro-batch. Accumulates into the grads the gradient of
  /// grad_scale * loss_sum (Megatron passes 1 / (num_tokens * num_microbatches) unless
  /// --calculate-per-token-loss). Dropout is on; each call draws fresh masks.
  loss_and_count forward_backward(const micro_batch& batch, T grad_scale);
  /// Forward only (evaluation); dropout off unless asked, gradients untouched.
  loss_and_count forward_only(const micro_batch& batch, bool apply_dropout = false);

  std::vector<parameter<T>>& parameters() { return store_.all(); }
  parameter_store<T>& store() { return store_; }
  void zero_grad() { store_.zero_grad(); }
  const gpt_model_config& config() const { return config_; }
  /// The dropout mask generation; forward_backward advances it by one.
  std::uint64_t dropout_step() const { return step_; }
  void set_dropout_step(std::uint64_t step) { step_ = step; }

 private:
  loss_and_count run(const micro_batch& batch, bool training, bool backward, T grad_scale);
  void load_batch(const micro_batch& batch);

  gpt_model_config config_;
  group& tp_;
  parameter_store<T> store_;
  language_model_embedding<T> embedding_;
  std::vector<transformer_layer<T>> layers_;
  std::optional<norm<T>> final_layernorm_;
  std::unique_ptr<output_layer_loss<T>> output_;
  std::uint64_t step_ = 0;
  // [seq, batch]-ordered copies of the batch, and the residual stream entering each layer.
  std::vector<std::int32_t> ids_, positions_, labels_;
  std::vector<float> mask_;
  std::vector<std::vector<T>> stream_;
  std::vector<T> final_, grad_a_, grad_b_;
};

}  // namespace mactor::model
