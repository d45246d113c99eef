// One rank's evaluations: the validation sets and the test split as Megatron builds them
// (--full-validation, --multiple-validation-sets), and the forward-only passes over them.
#include <chrono>
#include <stdexcept>

#include "data/blended_dataset.hpp"
#include "data/data_error.hpp"
#include "training/model_spec.hpp"
#include "training/rank_worker.hpp"

namespace mactor::training {

void check_full_validation_sets(const config::megatron_args& a, const rank_datasets& d) {
  if (a.validation.full_validation) {
    // Megatron takes the set's length for the number of evaluation steps; one global batch at
    // least is needed for a mean, and a partial last batch is dropped (its sampler's drop_last).
    const auto gbs = *a.training.global_batch_size;
    for (std::size_t k = 0; k < d.valid.size(); ++k)
      if (static_cast<std::int64_t>(d.valid[k]->size()) < gbs)
        throw data::data_error("--full-validation: validation set " + std::to_string(k) + " has " +
                               std::to_string(d.valid[k]->size()) + " samples, fewer than one global batch (" +
                               std::to_string(gbs) + "); give more validation data or a smaller --global-batch-size");
  }
}

model::loss_and_count sum_over_replicas(parallel_context& ctx, model::loss_and_count totals) {
  std::array<double, 2> sums{totals.loss_sum, totals.num_tokens};
  if (auto* dp = ctx.data_parallel()) dp->all_reduce(std::span<double>(sums));
  return {sums[0], sums[1]};
}

bool rank_worker::has_split(int split) const {
  if (split == 1) return !data_.valid.empty() && (args_.validation.eval_iters > 0 || args_.validation.full_validation);
  return split == 2 && data_.test && args_.validation.eval_iters > 0;
}

// --eval-iters global batches, or with --full-validation each whole global batch of the set once.
std::int64_t rank_worker::evaluation_passes(int split, int set) const {
  if (split == 1 && args_.validation.full_validation)
    return static_cast<std::int64_t>(data_.valid[set]->size()) / *args_.training.global_batch_size;
  return args_.validation.eval_iters;
}

bool rank_worker::begin_next_eval_pass() {
  if (eval_passes_left_ == 0) return false;
  --eval_passes_left_;
  const std::int64_t gbs = *args_.training.global_batch_size;
  const std::int64_t step = *args_.training.micro_batch_size * args_.derived.data_parallel_size;
  if (args_.validation.test_mode) engine_.check_qk_norms();
  auto& loader = eval_split_ == 1 ? *valid_loaders_[eval_set_] : *test_loader_;
  engine_.begin_schedule(/*forward_only=*/true, loader, eval_position_, static_cast<int>(gbs / step), /*cyclic=*/true);
  eval_position_ += gbs;
  eval_consumed_[eval_split_] += gbs;
  return true;
}

void rank_worker::begin_evaluation(int split, int set) {
  if (!has_split(split) || (split == 1 && (set < 0 || set >= validation_sets())))
    throw std::logic_error("no data for evaluation split " + std::to_string(split) + " set " + std::to_string(set));
  evaluation_start_ = std::chrono::steady_clock::now();
  eval_split_ = split;
  eval_set_ = split == 1 ? set : 0;
  eval_passes_left_ = evaluation_passes(split, eval_set_);
  eval_totals_ = {};
  if (split == 2) eval_consumed_[2] = 0;  // Megatron evaluates the test set from its start
  // The validation set continues where the last evaluation stopped; a full validation (several
  // sets need one) or --skip-train reads it from the start, as Megatron builds its loader then.
  const bool from_start = split == 2 || args_.validation.full_validation || args_.validation.skip_train;
  eval_position_ = from_start ? 0 : eval_consumed_[1];
  begin_next_eval_pass();
}

evaluation_report rank_worker::finish_evaluation() {
  const auto totals = sum_over_replicas(ctx_, eval_totals_);
  evaluation_report r;
  r.rank = ctx_.rank();
  r.split = eval_split_;
  r.has_loss = engine_.is_last_stage();
  r.loss_sum = totals.loss_sum;
  r.num_tokens = totals.num_tokens;
  // Megatron's level-0 'evaluate' timer spans the whole evaluate() call.
  r.timings.push_back({ctx_.rank(), {std::chrono::duration<double>(std::chrono::steady_clock::now() - evaluation_start_).count()}});
  eval_split_ = 0;
  return r;
}

}  // namespace mactor::training
