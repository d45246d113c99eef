// Everything one rank does for training, without the actor around it: the data, the stage engine
// and the LR schedule. An iteration or an evaluation is begun, pumped until its schedule has run
// (the driver is woken by the engine's callback when a transfer completes), then finished with
// the blocking collectives of the step. The stage actor drives one of these.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "config/megatron_args.hpp"
#include "config/microbatches.hpp"
#include "data/blended_dataset.hpp"
#include "data/tokenizer.hpp"
#include "model/lr_scheduler.hpp"
#include "checkpoint/tensor_piece.hpp"
#include "training/batch_loader.hpp"
#include "training/energy_meter.hpp"
#include "training/checkpointing.hpp"
#include "training/parallel_context.hpp"
#include "training/reports.hpp"
#include "training/result_validation.hpp"
#include "training/stage_engine.hpp"

namespace mactor::training {

/// The padded vocabulary size for the args' tokenizer (Megatron's _vocab_size_with_padding).
struct vocabulary {
  std::int64_t size = 0, padded = 0;
};
vocabulary vocabulary_from_args(const config::megatron_args& a);

/// One rank's datasets: Megatron's train, validation (one per set) and test splits.
struct rank_datasets {
  std::shared_ptr<data::sample_dataset> train, test;
  std::vector<std::shared_ptr<data::sample_dataset>> valid;
};
/// The datasets the flags ask for (throws data::data_error for unusable data), built as Megatron
/// builds them across ranks (rank_datasets.cpp): an index cache rank 0 writes and the others load.
rank_datasets datasets_from_args(const config::megatron_args& a, const data::tokenizer& tok, parallel_context& ctx);
/// With --full-validation, each validation set must hold one global batch at least.
void check_full_validation_sets(const config::megatron_args& a, const rank_datasets& d);
/// The loss sum and token count over the data-parallel replicas.
model::loss_and_count sum_over_replicas(parallel_context& ctx, model::loss_and_count totals);

class rank_worker {
 public:
  /// Builds the tokenizer, the datasets (throws data::data_error for unusable data) and this rank's
  /// share of the model and optimizer.
  rank_worker(const config::megatron_args& args, parallel_context& ctx);

  void set_wakeup(std::function<void()> wakeup) { engine_.set_wakeup(std::move(wakeup)); }
  /// Whether `split` (1 validation, 2 test) is evaluated: it has data, and --eval-iters > 0
  /// (or, for validation, --full-validation).
  bool has_split(int split) const;
  /// The validation sets (several with --multiple-validation-sets; 0 without validation data).
  int validation_sets() const { return static_cast<int>(data_.valid.size()); }

  /// Starts training iteration `iteration` (1-based) at `consumed` samples.
  void begin_iteration(std::int64_t iteration, std::int64_t consumed);
  /// Starts evaluating `split` (1 validation, 2 test; `set`: which validation set) over
  /// --eval-iters global batches, or with --full-validation over the whole validation set.
  void begin_evaluation(int split, int set = 0);
  /// Advances the schedule(s); true once the iteration's or evaluation's schedules have all run.
  bool pump();
  /// After pump() returned true for an iteration: finalize the gradients and validate the
  /// iteration's results (--rerun-mode, Megatron's should_run_forward_backward, agreed by every
  /// rank). True: the iteration was begun again on the same micro-batches; pump it again.
  bool rerun_iteration();
  /// After rerun_iteration() returned false: step optimizer and LR schedule, report; or, when the
  /// result validation ends the job, report its exit code without stepping.
  iteration_report finish_iteration();
  /// --load: the iteration the job resumes after (Megatron's train() sets the machine's counter).
  void set_start_iteration(std::int64_t iteration) { validation_.set_current_iteration(iteration); }
  /// After pump() returned true for an evaluation.
  evaluation_report finish_evaluation();

  /// --load: the checkpoint's model (and optimizer, scheduler, data position) into this rank;
  /// nullopt without --load or when it holds no checkpoint. Throws checkpoint::checkpoint_error.
  std::optional<loaded_checkpoint> load_checkpoint();
  /// A snapshot of this rank's state after iteration `iteration` at `consumed` samples; a
  /// non-persistent one under --non-persistent-ckpt-type local holds the rank's whole state.
  /// `buffers`: recycled memory the copies go into (null: fresh memory).
  checkpoint::rank_state capture_checkpoint(std::int64_t iteration, std::int64_t consumed, std::int64_t skipped,
                                            double floating_point_operations, bool non_persistent = false,
                                            checkpoint::snapshot_buffers* buffers = nullptr);

  stage_engine& engine() { return engine_; }
  const vocabulary& vocab() const { return vocab_; }

 private:
  rank_worker(const config::megatron_args& args, parallel_context& ctx, std::unique_ptr<data::tokenizer> tok);
  bool begin_next_eval_pass();
  std::int64_t evaluation_passes(int split, int set) const;
  bool memory_wanted() const;
  straggler_sample straggler_sample_now() const;
  void validate_losses();
  void validate_grads();
  void begin_schedule_of_iteration();

  const config::megatron_args& args_;
  parallel_context& ctx_;
  vocabulary vocab_;
  rank_datasets data_;
  std::unique_ptr<batch_loader> train_loader_, test_loader_;
  std::vector<std::unique_ptr<batch_loader>> valid_loaders_;  // one per validation set
  stage_engine engine_;
  model::lr_scheduler scheduler_;
  config::microbatch_plan batches_;  // each iteration's global batch (--rampup-batch-size)
  std::unique_ptr<energy_meter> energy_;  // --log-energy on the host's local rank 0
  std::int64_t iteration_ = 0;
  std::int64_t iteration_batch_ = 0;  // this iteration's global batch size
  std::int64_t consumed_ = 0;         // the samples before this iteration (a rerun reads them again)
  int microbatches_ = 0;
  bool concluded_ = false;            // rerun_iteration() has said no further run is needed
  result_validation validation_;      // --rerun-mode
  bool memory_logged_ = false;  // the report after the first log line has been sent
  std::chrono::steady_clock::time_point started_, forward_backward_start_, evaluation_start_;
  // Evaluation in progress: split and set, passes left, where its next pass reads, the samples
  // each split has consumed (Megatron's consumed_valid_samples counts every validation pass), sums so far.
  int eval_split_ = 0, eval_set_ = 0;
  std::int64_t eval_passes_left_ = 0;
  std::int64_t eval_position_ = 0;
  std::array<std::int64_t, 3> eval_consumed_{0, 0, 0};
  model::loss_and_count eval_totals_;
};

}  // namespace mactor::training
