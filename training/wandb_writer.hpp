// Megatron's Weights & Biases writer (--wandb-project, --wandb-exp-name, --wandb-entity,
// --wandb-save-dir): the `wandb` Python package itself, driven by a small bridge process over a
// pipe, so runs land in W&B (online, or offline with WANDB_MODE=offline) exactly as Megatron's
// wandb.init / wandb.log calls put them there.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "config/megatron_args.hpp"

namespace mactor::training {

class wandb_writer {
 public:
  /// Megatron's _set_wandb_writer: wandb.init(dir=--wandb-save-dir or <save>/wandb,
  /// name=--wandb-exp-name, project=--wandb-project, config=the args[, entity]) and
  /// wandb.config.update({'slurm_job_name': $SLURM_JOB_NAME or 'N/A'}). The bridge runs under
  /// $MACTOR_PYTHON (default python3). Throws std::runtime_error naming the fix when wandb cannot
  /// be imported or its init fails.
  explicit wandb_writer(const config::megatron_args& args);
  ~wandb_writer();
  wandb_writer(const wandb_writer&) = delete;
  wandb_writer& operator=(const wandb_writer&) = delete;

  /// wandb.log({key: value}, step), one call per key as Megatron makes them.
  void log(const std::string& key, double value, std::int64_t step);
  /// wandb.finish(): the run's files are complete when this returns.
  void finish();

 private:
  pid_t pid_ = -1;
  int to_bridge_ = -1;
};

/// The interpreter the bridge runs under: $MACTOR_PYTHON, else python3.
std::string wandb_python();

}  // namespace mactor::training
