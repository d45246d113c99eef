// Megatron's validate_args and config __post_init__ rules, and the values they derive.
#pragma once

#include <string>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::config {

/// Where this process sits in the job, as the launcher's environment says.
struct process_placement {
  std::int64_t rank = 0;
  std::int64_t world_size = 1;
};

struct validation_report {
  std::vector<std::string> errors;    // each names the flags, their values and a fix
  std::vector<std::string> warnings;  // Megatron's WARNING lines (printed by rank 0)
  std::vector<std::string> notices;   // Megatron's informational lines ("setting global batch size to ...")
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

/// Applies every rule of shared/megatron/validation.md in Megatron's order, filling derived values
/// into `args` (data_parallel_size, global_batch_size, ffn_hidden_size, kv_channels, ...).
/// All violations are collected in one pass; `args` is only meaningful when the report is ok().
validation_report validate(megatron_args& args, const process_placement& placement);

/// The ranks in one data-parallel replica, tp x pp x cp: Megatron's data-parallel size is the world
/// size divided by this (validate() reports a world size it does not divide).
std::int64_t replica_size(const megatron_args& args);

/// Megatron's `_vocab_size_with_padding`: rounds up to a multiple of divisible_by * tp.
std::int64_t padded_vocab_size(std::int64_t vocab_size, const megatron_args& args);

/// The divisors of n, as "1, 2, 3 or 6": used in messages that suggest a fix.
std::string divisors_text(std::int64_t n);

}  // namespace mactor::config
