// Sample assembly into model-ready micro-batches.
#include "training/batch_loader.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "data/data_error.hpp"

namespace mactor::training {
namespace {

// The dataset's attention mask ([L, L], true where masked: causal, and with --reset-attention-mask
// no key at or before an EOD for the queries after it) as each position's first visible key.
void append_document_starts(const data::gpt_sample& s, std::vector<std::int32_t>& starts) {
  const std::size_t length = s.tokens.size();
  if (s.attention_mask.size() != length * length) {
    starts.insert(starts.end(), length, 0);
    return;
  }
  for (std::size_t p = 0; p < length; ++p) {
    const std::uint8_t* row = s.attention_mask.data() + p * length;
    std::size_t first = 0;
    while (first < p && row[first]) ++first;
    starts.push_back(static_cast<std::int32_t>(first));
  }
}

}  // namespace

batch_loader::batch_loader(std::shared_ptr<data::sample_dataset> dataset, int micro_batch_size, std::int64_t vocab_size,
                           int dp_rank, int dp_size)
    : dataset_(std::move(dataset)), micro_batch_size_(micro_batch_size), vocab_size_(vocab_size), dp_rank_(dp_rank),
      dp_size_(dp_size) {}

batch_buffers batch_loader::load(std::int64_t consumed_samples, bool cyclic) const {
  batch_buffers b;
  b.micro_batch_size = micro_batch_size_;
  const std::int64_t n = size();
  for (int i = 0; i < micro_batch_size_; ++i) {
    std::int64_t index = consumed_samples + static_cast<std::int64_t>(dp_rank_) * micro_batch_size_ + i;
    if (cyclic && n > 0) index %= n;
    if (index >= n)
      throw std::runtime_error("the dataset has " + std::to_string(n) + " samples but sample " + std::to_string(index) +
                               " was asked for; lower --train-iters or give more data");
    const auto s = dataset_->get(static_cast<std::size_t>(index));
    for (std::size_t t = 0; t < s.tokens.size(); ++t) {
      for (const std::int64_t id : {s.tokens[t], s.labels[t]})
        if (id < 0 || id >= vocab_size_)
          throw data::data_error("sample " + std::to_string(index) + " holds token id " + std::to_string(id) +
                                 ", outside the vocabulary [0, " + std::to_string(vocab_size_) +
                                 ") of the model: the data was made with a larger vocabulary; check --tokenizer-type and --vocab-size");
      b.tokens.push_back(static_cast<std::int32_t>(s.tokens[t]));
      b.labels.push_back(static_cast<std::int32_t>(s.labels[t]));
      b.position_ids.push_back(static_cast<std::int32_t>(s.position_ids[t]));
      b.loss_mask.push_back(s.loss_mask[t]);
    }
    append_document_starts(s, b.document_start);
  }
  // A causal mask everywhere (no --reset-attention-mask): no document mask to pass on.
  if (std::all_of(b.document_start.begin(), b.document_start.end(), [](std::int32_t v) { return v == 0; }))
    b.document_start.clear();
  return b;
}

}  // namespace mactor::training
