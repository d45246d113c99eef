// Megatron's pretrain() loop for one process: data, model, optimizer, LR schedule, log lines, evaluation.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "config/megatron_args.hpp"
#include "training/parallel_context.hpp"

namespace mactor::training {

/// What a finished run reports (tests compare these with references).
struct training_result {
  std::vector<double> lm_loss;       // per iteration, token-weighted over the global batch
  std::vector<double> grad_norm;     // per iteration, before clipping (0 when --clip-grad 0)
  std::vector<double> learning_rate; // per iteration, as the log prints it (after the step)
  std::int64_t consumed_train_samples = 0;
};

/// Trains as Megatron's pretrain_gpt does, in the layout of `ctx`: tensor-parallel collectives
/// inside the model, the pipeline schedule between stages, each data-parallel replica on its slice
/// of every global batch with gradients averaged (or reduce-scattered with the distributed
/// optimizer). The last rank prints Megatron's lines to `out`. Throws data::data_error for
/// unusable data, comm::comm_error for a failed peer and std::runtime_error for other failures.
/// The result's losses are real on the last pipeline stage.
training_result train(const config::megatron_args& args, std::FILE* out, parallel_context& ctx);

}  // namespace mactor::training
