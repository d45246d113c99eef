// What a rank reports after an iteration or an evaluation: plain data that the replica and
// coordinator actors carry (actors/ registers these with CAF; nothing here includes it).
#pragma once

#include <cstdint>
#include <vector>

#include "training/memory_report.hpp"
#include "training/straggler_report.hpp"

namespace mactor::training {

/// One rank's training timers for one iteration: seconds by step_timer (training/step_timers.hpp).
struct rank_timings {
  int rank = 0;
  std::vector<double> seconds;
};

/// One rank's view of one training iteration. The loss is real on the last pipeline stage only
/// (already summed over the data-parallel replicas); the rest is the same on every rank.
struct iteration_report {
  int rank = 0;
  std::int64_t iteration = 0;
  bool has_loss = false;
  double loss_sum = 0, num_tokens = 0;
  bool update_successful = true;  ///< false: an fp16 step skipped for an inf/NaN gradient
  double loss_scale = 1.0;         ///< after this step's update (Megatron logs it so)
  bool has_grad_norm = false;
  double grad_norm = 0;
  bool has_num_zeros = false;
  double num_zeros = 0;
  bool has_params_norm = false;
  double params_norm = 0;
  double learning_rate = 0;
  bool has_decoupled_learning_rate = false;
  double decoupled_learning_rate = 0;
  double seconds = 0;  ///< wall time of the iteration on this rank
  /// The samples this iteration trained on: micro batch x dp x its microbatches (it follows
  /// --rampup-batch-size); the coordinator advances the consumed samples by it.
  std::int64_t global_batch_size = 0;
  /// --exit-signal-handler: this rank got SIGTERM (the replica and the coordinator OR them).
  bool exit_signal = false;
  /// --rerun-mode validate_results: the iteration's result was rejected and every rank agreed to
  /// end the job before the optimizer step with Megatron's exit code (16 or 17), saving first
  /// when `rerun_checkpoint` (training/result_validation.hpp). 0: the step was taken.
  int rerun_exit_code = 0;
  bool rerun_checkpoint = false;
  /// --log-energy: the host's package energy during this iteration's step, from the rank with
  /// local rank 0 (one meter per host; the replica and the coordinator sum them), and whether
  /// such a rank found no counter to read.
  double energy_joules = 0;
  bool energy_missing = false;
  /// With --timing-log-level > 0: this rank's timers; the replica and the coordinator gather
  /// every rank's here (Megatron's timers report min and max over all ranks).
  std::vector<rank_timings> timings;
  /// Every rank's memory after this iteration (gathered as the timings are).
  std::vector<rank_memory> memory;
  /// --log-straggler: every rank's forward and batch-load times (gathered as the timings are).
  std::vector<straggler_sample> straggler;
  /// MoE: the auxiliary losses as Megatron's track_moe_metrics has them after its reductions,
  /// [3 * num_layers] (load_balancing_loss, seq_load_balancing_loss, z_loss by global layer): each
  /// rank's stage fills its layers, averaged over the data-parallel replicas; the replica sums
  /// its stages'. Empty without MoE.
  std::vector<double> moe_losses;
  /// Multi-token prediction: each depth's loss as Megatron's track_mtp_metrics has it (the mean
  /// over the micro-batches of each one's masked mean, averaged over the data-parallel replicas),
  /// from the last stage's first tensor-parallel rank. Empty without MTP.
  std::vector<double> mtp_losses;
};

/// One rank's view of one evaluation (eval_iters global batches of one split).
struct evaluation_report {
  int rank = 0;
  int split = 1;  ///< 1 validation, 2 test
  bool has_loss = false;
  double loss_sum = 0, num_tokens = 0;
  /// This rank's 'evaluate' timer (seconds = {wall time of the evaluation}); the replica and the
  /// coordinator gather every rank's here.
  std::vector<rank_timings> timings;
};

/// What a finished run reports (tests compare these with references).
struct training_result {
  std::vector<double> lm_loss;        ///< per iteration, token-weighted over the global batch
  std::vector<double> grad_norm;      ///< per iteration, before clipping (0 when --clip-grad 0)
  std::vector<double> learning_rate;  ///< per iteration, as the log prints it (after the step)
  std::vector<double> loss_scale;     ///< per iteration, after the scaler's update (1 without one)
  std::vector<bool> skipped;          ///< per iteration: an fp16 step skipped for an overflow
  std::int64_t consumed_train_samples = 0;
};

}  // namespace mactor::training
