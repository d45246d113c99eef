// Megatron's pretrain() loop for one process: data, model, optimizer, LR schedule, log lines, evaluation.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "comm/communicator.hpp"
#include "config/megatron_args.hpp"

namespace mactor::training {

/// What a finished run reports (tests compare these with references).
struct training_result {
  std::vector<double> lm_loss;       // per iteration, token-weighted over the global batch
  std::vector<double> grad_norm;     // per iteration, before clipping (0 when --clip-grad 0)
  std::vector<double> learning_rate; // per iteration, as the log prints it (after the step)
  std::int64_t consumed_train_samples = 0;
};

/// Trains as Megatron's pretrain_gpt does with tp = pp = 1. With `data_parallel` (dp > 1) each rank
/// takes its slice of every global batch and gradients are averaged over the group, as Megatron's
/// DDP does; the last rank prints Megatron's lines to `out`. Throws data::data_error for unusable
/// data, comm::comm_error for a failed peer and std::runtime_error for other failures.
training_result train(const config::megatron_args& args, std::FILE* out, comm::communicator* data_parallel = nullptr);

}  // namespace mactor::training
