// The resolved configuration: every Megatron flag (grouped as Megatron registers them) plus derived values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/generated/args.hpp"

namespace mactor::config {

/// Values Megatron computes in parse_args/validate_args and stores on `args` under these dest names.
struct derived_args {
  std::int64_t rank = 0;        // from the launcher's environment
  std::int64_t world_size = 1;  // from the launcher's environment
  std::int64_t data_parallel_size = 1;
  std::int64_t transformer_pipeline_model_parallel_size = 1;
  std::optional<std::int64_t> virtual_pipeline_model_parallel_size;
  std::int64_t num_microbatches = 1;  // at the full global batch size
  std::string params_dtype = "float32";
  bool use_dist_ckpt = true;
  bool variable_seq_lengths = false;
  std::int64_t consumed_train_samples = 0;
  std::int64_t skipped_train_samples = 0;
  std::int64_t consumed_valid_samples = 0;
};

/// mactor's own flags that change the run: Megatron has none of them, and its argument listing
/// leaves them out; they travel in the config message with the rest.
struct mactor_args {
  /// --pipeline-schedule: empty for Megatron's choice, else "1f1b", "interleaved-1f1b" or
  /// "zb-h1" (schedules/schedule_shape.hpp).
  std::string pipeline_schedule;
};

/// What every actor receives: Megatron's args after validation.
struct megatron_args : flag_args {
  derived_args derived;
  mactor_args mactor;
};

}  // namespace mactor::config
