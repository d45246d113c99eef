// The output layer (column-parallel over the vocabulary, or the tied word embeddings) fused
// with Megatron's vocab-parallel cross-entropy. Rows are processed in chunks: each chunk's
// logits are made, turned into loss and logit gradients, and consumed at once, so the full
// [rows, vocab] logits never exist.
#pragma once
#include <cstdint>

#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/parameter.hpp"

namespace mactor::model {

class output_layer_loss {
 public:
  /// tied_weight: the word-embedding parameter id to share, or -1 to register
  /// output_layer.weight [vocab, hidden] (rows split).
  output_layer_loss(parameter_store& store, const gpt_model_config& config, int tp_rank,
                    int tp_size, int tied_weight);
  /// Returns sum over rows of loss * mask for h [rows, hidden], labels [rows], mask [rows].
  /// When dh is not empty, also accumulates the weight gradient of grad_scale * that sum and
  /// writes dh [rows, hidden] (all-reduced over tp). With sequence parallelism h and dh are this
  /// rank's [rows / tp, hidden] sequence shards (rows still counts all of them); every rank
  /// computes the loss of all rows over its vocabulary block, as without it.
  double forward_backward(parameter_store& store, group& tp, tensor::const_tensor_view h,
                          const std::int32_t* labels, const float* mask, double grad_scale,
                          tensor::tensor_view dh, int rows);

 private:
  void combine_over_ranks(group& tp, int n);
  int hidden_, vocab_local_, vocab_start_, weight_;
  bool sequence_parallel_;
  tensor::tensor logits_, row_max_, sums_, loss_, scale_, gathered_, h_full_, dh_full_;
};

}  // namespace mactor::model
