// Megatron's microbatch calculators: constant, and ramp-up of the global batch size over consumed samples.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/megatron_args.hpp"

namespace mactor::config {

struct batch_rampup {
  std::int64_t start = 0;      // --rampup-batch-size START
  std::int64_t increment = 0;  // INCR
  std::int64_t samples = 0;    // RAMPUP_SAMPLES
};

struct microbatch_plan {
  std::int64_t micro_batch_size = 1;
  std::int64_t data_parallel_size = 1;
  std::int64_t global_batch_size = 1;
  std::optional<batch_rampup> rampup;
  bool decrease_batch_size_if_needed = false;

  /// The global batch size in effect after `consumed_samples` (Megatron's current_global_batch_size).
  [[nodiscard]] std::int64_t current_global_batch_size(std::int64_t consumed_samples) const;
  /// The running global batch, rounded down to a multiple of mbs*dp when decrease_batch_size_if_needed.
  [[nodiscard]] std::int64_t running_global_batch_size(std::int64_t consumed_samples) const;
  /// Microbatches per iteration per data-parallel replica at `consumed_samples`.
  [[nodiscard]] std::int64_t num_microbatches(std::int64_t consumed_samples) const;
  /// Sample-based training length with ramp-up (Megatron's update_train_iters).
  [[nodiscard]] std::int64_t train_iters_for_samples(std::int64_t train_samples) const;
};

/// The plan the resolved flags give (after validation: --rampup-batch-size's three values are
/// integers). Every rank and the coordinator derive each iteration's batch from it.
microbatch_plan microbatch_plan_of(const megatron_args& args);

}  // namespace mactor::config
