// Micro-batches in Megatron's order: MegatronPretrainingSampler over a dataset, for one data-parallel rank.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/gpt_dataset.hpp"
#include "model/gpt_model.hpp"

namespace mactor::training {

/// One micro-batch as the model takes it: [micro_batch_size, seq_length] int32/float arrays.
struct batch_buffers {
  std::vector<std::int32_t> tokens, labels, position_ids;
  std::vector<float> loss_mask;
  std::vector<std::int32_t> document_start;  // --reset-attention-mask's document mask; empty: causal
  int micro_batch_size = 0;

  [[nodiscard]] model::micro_batch view() const {
    return {tokens.data(), labels.data(), loss_mask.data(), position_ids.data(), micro_batch_size,
            document_start.empty() ? nullptr : document_start.data()};
  }
};

/// Reads consecutive micro-batches: with consumed samples c, data-parallel rank r of dp takes
/// samples [c + r*mbs, c + (r+1)*mbs) of each global step of mbs*dp samples, as Megatron's
/// MegatronPretrainingSampler does. Wraps around the dataset only for evaluation (cyclic).
class batch_loader {
 public:
  /// Token and label ids must lie in [0, vocab_size): the padded vocabulary of the model.
  batch_loader(std::shared_ptr<data::sample_dataset> dataset, int micro_batch_size, std::int64_t vocab_size,
               int dp_rank = 0, int dp_size = 1);
  /// The micro-batch starting at `consumed_samples` (a multiple of mbs*dp). Throws data::data_error
  /// naming the sample and --vocab-size when the data holds ids the model's vocabulary lacks.
  batch_buffers load(std::int64_t consumed_samples, bool cyclic = false) const;
  std::int64_t size() const { return static_cast<std::int64_t>(dataset_->size()); }

 private:
  std::shared_ptr<data::sample_dataset> dataset_;
  int micro_batch_size_;
  std::int64_t vocab_size_;
  int dp_rank_, dp_size_;
};

}  // namespace mactor::training
