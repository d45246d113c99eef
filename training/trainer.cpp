// The single-process training loop: Megatron's train_step, training_log and evaluate, in order.
#include "training/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <cmath>
#include <stdexcept>
#include <string>

#include "config/config_json.hpp"
#include "config/python_text.hpp"
#include "config/validate.hpp"
#include "data/blended_dataset.hpp"
#include "model/gpt_model.hpp"
#include "model/lr_scheduler.hpp"
#include "model/optimizer.hpp"
#include "model/training_log.hpp"
#include "training/batch_loader.hpp"
#include "training/flops.hpp"
#include "training/tensorboard_writer.hpp"
#include "training/model_spec.hpp"
#include "training/stage_engine.hpp"

namespace mactor::training {
namespace {

using clock_type = std::chrono::steady_clock;

// Sums over a group of ranks when there is one.
void sum_over(comm::communicator* group, std::span<double> v) {
  if (group) group->all_reduce(v);
}

// Megatron's evaluate(): eval_iters global batches, forward only through the pipeline,
// token-weighted over all replicas. Every rank returns the loss; only the last stage's is real.
double evaluate(stage_engine& engine, parallel_context& ctx, const batch_loader& loader, std::int64_t& consumed,
                std::int64_t eval_iters, std::int64_t global_batch, int micro_batch) {
  double totals[2] = {0, 0};
  const std::int64_t step = static_cast<std::int64_t>(micro_batch) * ctx.groups().dp();
  for (std::int64_t it = 0; it < eval_iters; ++it) {
    engine.run_schedule(/*forward_only=*/true, loader, consumed, static_cast<int>(global_batch / step), /*cyclic=*/true);
    totals[0] += engine.loss_totals().loss_sum;
    totals[1] += engine.loss_totals().num_tokens;
    consumed += global_batch;
  }
  sum_over(ctx.data_parallel(), totals);
  return totals[1] > 0 ? totals[0] / totals[1] : 0.0;
}

// Megatron's evaluate_and_print_results: the block on stdout and, with --tensorboard-dir, the
// "lm loss validation" scalars against iterations and consumed samples.
void report_validation(std::FILE* out, tensorboard_writer* tb, const config::megatron_args& a, const std::string& prefix,
                       double loss, std::int64_t iteration, std::int64_t consumed) {
  if (tb) {
    tb->add_scalar("lm loss validation", loss, iteration);
    tb->add_scalar("lm loss validation vs samples", loss, consumed);
    if (a.logging.log_validation_ppl_to_tensorboard) {
      const double ppl = std::exp(std::min(20.0, loss));
      tb->add_scalar("lm loss validation ppl", ppl, iteration);
      tb->add_scalar("lm loss validation ppl vs samples", ppl, consumed);
    }
    tb->flush();
  }
  if (!out) return;
  const std::pair<std::string, float> v{"lm loss", static_cast<float>(loss)};
  std::fprintf(out, "%s\n", model::format_validation_block(prefix, std::span(&v, 1)).c_str());
  std::fflush(out);
}

// Megatron's training_log TensorBoard scalars for one iteration (every --tensorboard-log-interval).
void log_to_tensorboard(tensorboard_writer& tb, const config::megatron_args& a, std::int64_t iteration, std::int64_t consumed,
                        double lr, std::optional<double> decoupled_lr, std::int64_t gbs, double lm_loss,
                        const model::optimizer_step_result& step, std::optional<double> params_norm, std::int64_t world) {
  auto both = [&](const std::string& tag, double v) {
    tb.add_scalar(tag, v, iteration);
    tb.add_scalar(tag + " vs samples", v, consumed);
  };
  both("learning-rate", lr);
  if (decoupled_lr) tb.add_scalar("decoupled-learning-rate", *decoupled_lr, iteration);
  both("batch-size", static_cast<double>(gbs));
  both("lm loss", lm_loss);
  if (a.logging.log_loss_scale_to_tensorboard) both("loss-scale", 1.0);
  if (a.logging.log_world_size_to_tensorboard) both("world-size", static_cast<double>(world));
  if (step.grad_norm) both("grad-norm", *step.grad_norm);
  if (step.num_zeros_in_grad) both("num-zeros", *step.num_zeros_in_grad);
  if (params_norm) both("params-norm", *params_norm);
}

}  // namespace

training_result train(const config::megatron_args& a, std::FILE* printer, parallel_context& ctx) {
  // Megatron prints from the last rank (print_rank_last): the last pipeline stage, which has the loss.
  const bool prints = ctx.rank() == ctx.world_size() - 1;
  std::FILE* out = prints ? printer : nullptr;
  const int dp_rank = ctx.dp_rank(), dp_size = ctx.groups().dp();
  auto print = [&](const std::string& line) {
    if (!out) return;
    std::fprintf(out, "%s\n", line.c_str());
    std::fflush(out);
  };
  // Megatron's writer lives on the last rank only.
  std::unique_ptr<tensorboard_writer> tb;
  if (a.training.tensorboard_dir && prints) {
    tb = std::make_unique<tensorboard_writer>(*a.training.tensorboard_dir);
    for (const auto& [name, value] : config::argument_strings(a)) tb->add_text(name, value, 0);  // write_args_to_tensorboard
  }
  const auto tok = tokenizer_from_args(a);
  const std::int64_t vocab = tok->vocab_size();
  const std::int64_t padded = config::padded_vocab_size(vocab, a);
  print(" > padded vocab (size: " + std::to_string(vocab) + ") with " + std::to_string(padded - vocab) +
        " dummy tokens (new size: " + std::to_string(padded) + ")");

  stage_engine engine(a, ctx, padded);

  const auto datasets = data::build_gpt_datasets(dataset_config_from_args(a, *tok), split_sample_counts(a));
  if (!datasets[0]) throw std::runtime_error("the --split gives no training data; give the train split a weight");
  const int mbs = static_cast<int>(*a.training.micro_batch_size);
  const batch_loader train_loader(datasets[0], mbs, padded, dp_rank, dp_size);
  const bool do_valid = datasets[1] && a.validation.eval_iters > 0;
  const bool do_test = datasets[2] && a.validation.eval_iters > 0;

  model::lr_scheduler scheduler(model::lr_scheduler_options_from_args(lr_schedule_args_from_args(a)), engine.optimizer().param_groups());

  const std::int64_t gbs = *a.training.global_batch_size;
  const std::int64_t m = a.derived.num_microbatches;
  const std::int64_t train_iters = *a.training.train_iters;
  training_result result;
  model::training_log_accumulator log_acc;
  std::int64_t consumed_valid = 0;
  auto interval_start = clock_type::now();

  auto print_datetime = [&](const std::string& what) {  // Megatron's print_datetime
    print("[" + what + "] datetime: " + model::log_timestamp(std::chrono::system_clock::now()) + " ");
  };
  print_datetime("after dataloaders are built");
  print(a.validation.skip_train ? "skipping training (--skip-train is on) ..." : "training ...");
  const auto train_start = clock_type::now();
  std::int64_t iteration = 0;
  while (!a.validation.skip_train && iteration < train_iters) {
    engine.zero_grad();
    engine.run_schedule(/*forward_only=*/false, train_loader, result.consumed_train_samples, static_cast<int>(m), false);
    engine.finalize_grads();
    // The loss lives on the last pipeline stage; sum it over the replicas there.
    double reported[2] = {engine.loss_totals().loss_sum, engine.loss_totals().num_tokens};
    sum_over(ctx.data_parallel(), reported);
    const double loss_sum = reported[0], tokens = reported[1];
    const auto step = engine.optimizer_step(a.regularization.clip_grad, a.logging.log_num_zeros_in_grad);
    scheduler.step(gbs);
    result.consumed_train_samples += gbs;
    ++iteration;

    const double lm_loss = tokens > 0 ? loss_sum / tokens : 0.0;
    const double lr = model::logged_learning_rate(engine.optimizer().param_groups()).value_or(0.0);
    result.lm_loss.push_back(lm_loss);
    result.grad_norm.push_back(step.grad_norm.value_or(0.0));
    result.learning_rate.push_back(lr);
    const std::pair<std::string, float> losses[] = {{"lm loss", static_cast<float>(lm_loss)}};
    log_acc.add_iteration(losses, !step.update_successful);

    const std::optional<double> params_norm =
        a.logging.log_params_norm ? std::optional<double>(engine.params_norm()) : std::nullopt;
    if (tb && iteration % a.logging.tensorboard_log_interval == 0)
      log_to_tensorboard(*tb, a, iteration, result.consumed_train_samples, lr,
                         model::logged_decoupled_learning_rate(engine.optimizer().param_groups()), gbs, lm_loss, step, params_norm, ctx.world_size());
    if (iteration % a.training.log_interval == 0) {
      const auto now = clock_type::now();
      model::training_log_inputs in;
      in.timestamp = model::log_timestamp(std::chrono::system_clock::now());
      in.iteration = iteration;
      in.train_iters = train_iters;
      in.consumed_train_samples = result.consumed_train_samples;
      in.interval_seconds = std::chrono::duration<double>(now - interval_start).count();
      in.learning_rate = lr;
      in.decoupled_learning_rate = model::logged_decoupled_learning_rate(engine.optimizer().param_groups());
      in.global_batch_size = gbs;
      in.world_size = ctx.world_size();
      if (a.logging.log_throughput) in.flops_per_iteration = num_floating_point_operations(a, padded, gbs);
      in.grad_norm = step.grad_norm;
      in.num_zeros_in_grad = step.num_zeros_in_grad;
      in.params_norm = params_norm;
      const auto line = model::training_log_interval(in, log_acc);
      print(line);
      if (tb && a.logging.log_timers_to_tensorboard) {
        const double per_iteration = in.interval_seconds / static_cast<double>(a.training.log_interval);
        tb->add_scalar("iteration-time", per_iteration, iteration);
        if (in.flops_per_iteration) tb->add_scalar("throughput", *in.flops_per_iteration / (per_iteration * 1e12 * ctx.world_size()), iteration);
      }
      if (tb) tb->flush();
      interval_start = clock_type::now();
    }
    if (do_valid && a.validation.eval_interval > 0 && iteration % a.validation.eval_interval == 0) {
      const batch_loader valid(datasets[1], mbs, padded, dp_rank, dp_size);
      report_validation(out, tb.get(), a, "iteration " + std::to_string(iteration),
                        evaluate(engine, ctx, valid, consumed_valid, a.validation.eval_iters, gbs, mbs), iteration,
                        result.consumed_train_samples);
    }
    if (a.training.exit_duration_in_mins.value_or(0) != 0) {  // Python truthiness: 0 means off
      // Every replica stops at the same iteration: one past the limit is enough (Megatron's MAX all-reduce).
      const double minutes = std::chrono::duration<double>(clock_type::now() - train_start).count() / 60.0;
      double over[1] = {minutes > static_cast<double>(*a.training.exit_duration_in_mins) ? 1.0 : 0.0};
      sum_over(ctx.world(), over);
      if (over[0] > 0) {
        print_datetime("exiting program after " + config::python_float_repr(minutes) + " minutes");
        break;
      }
    }
    if (a.training.exit_interval.value_or(0) != 0 && iteration % *a.training.exit_interval == 0) {
      print_datetime("exiting program at iteration " + std::to_string(iteration));
      break;
    }
  }
  if (!a.validation.skip_train) print_datetime("after training is done");
  if (a.validation.skip_train) tb.reset();  // Megatron writes no TensorBoard values when only evaluating
  if (do_valid) {
    const batch_loader valid(datasets[1], mbs, padded, dp_rank, dp_size);
    report_validation(out, tb.get(), a, "iteration " + std::to_string(iteration) + " on validation set",
                      evaluate(engine, ctx, valid, consumed_valid, a.validation.eval_iters, gbs, mbs), iteration,
                      result.consumed_train_samples);
  }
  if (do_test) {
    const batch_loader test(datasets[2], mbs, padded, dp_rank, dp_size);
    std::int64_t consumed_test = 0;
    report_validation(out, tb.get(), a, "iteration " + std::to_string(iteration) + " on test set",
                      evaluate(engine, ctx, test, consumed_test, a.validation.eval_iters, gbs, mbs), iteration,
                      result.consumed_train_samples);
  }
  return result;
}

}  // namespace mactor::training
