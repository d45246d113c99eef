// Megatron's data arguments turned into dataset requests: --data-path lists into blends
// (utils.get_blend_from_list) and the per-split sample counts (training.py
// get_train_valid_test_num_samples).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/gpt_dataset.hpp"

namespace mactor::data {

/// ["p1", "p2"] -> prefixes; ["30", "p1", "70", "p2"] -> prefixes with weights. An odd-length
/// list, or one whose every other token is not a number, is all prefixes. Prefixes are stripped.
/// Throws data_error for a half-weighted list ("1 a b c" style mixes).
data_blend blend_from_list(const std::vector<std::string>& words);

/// What get_train_valid_test_num_samples needs from the flags.
struct sample_count_args {
  std::optional<std::int64_t> train_samples;  // --train-samples
  std::int64_t train_iters = 0;               // --train-iters
  std::int64_t global_batch_size = 1;         // --global-batch-size
  std::int64_t eval_interval = 1000;          // --eval-interval
  std::int64_t eval_iters = 100;              // --eval-iters
  bool full_validation = false;               // --full-validation
};

/// train = train_samples or train_iters * gbs; valid = (train_iters // eval_interval + 1) *
/// eval_iters * gbs (nullopt with full validation); test = eval_iters * gbs.
std::array<std::optional<std::int64_t>, 3> train_valid_test_num_samples(const sample_count_args& a);

}  // namespace mactor::data
