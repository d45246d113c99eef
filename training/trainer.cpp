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

namespace mactor::training {
namespace {

using clock_type = std::chrono::steady_clock;

std::vector<model::optim_param> optimizer_view(model::gpt_model<float>& m, bool decoupled) {
  std::vector<model::optim_param> out;
  for (auto& p : m.parameters()) {
    model::optim_param o;
    o.name = p.name;
    o.value = p.value;
    o.grad = p.grad;
    o.numel = p.numel;
    o.no_weight_decay = p.no_weight_decay;
    // Megatron applies --decoupled-lr to the embedding and the output layer.
    o.decoupled_lr = decoupled && (p.name.rfind("embedding.", 0) == 0 || p.name.rfind("output_layer.", 0) == 0);
    out.push_back(std::move(o));
  }
  return out;
}

double mask_sum(const batch_buffers& b) {
  double s = 0;
  for (float m : b.loss_mask) s += m;
  return s;
}

// This rank's place among the data-parallel replicas; sums over them when there are several.
struct replicas {
  comm::communicator* group = nullptr;
  int rank() const { return group ? group->rank() : 0; }
  int size() const { return group ? group->size() : 1; }
  bool prints() const { return rank() == size() - 1; }  // Megatron's print_rank_last
  void sum(std::span<double> v) const {
    if (group) group->all_reduce(v);
  }
};

// Megatron's evaluate(): eval_iters global batches, forward only, token-weighted over all replicas.
double evaluate(model::gpt_model<float>& m, const batch_loader& loader, std::int64_t& consumed, std::int64_t eval_iters,
                std::int64_t global_batch, int micro_batch, const replicas& dp) {
  double totals[2] = {0, 0};
  const std::int64_t step = static_cast<std::int64_t>(micro_batch) * dp.size();
  for (std::int64_t it = 0; it < eval_iters; ++it) {
    for (std::int64_t j = 0; j < global_batch / step; ++j) {
      const auto b = loader.load(consumed + j * step, /*cyclic=*/true);
      const auto r = m.forward_only(b.view());
      totals[0] += r.loss_sum;
      totals[1] += r.num_tokens;
    }
    consumed += global_batch;
  }
  dp.sum(totals);
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

training_result train(const config::megatron_args& a, std::FILE* printer, comm::communicator* data_parallel) {
  const replicas dp{data_parallel};
  std::FILE* out = dp.prints() ? printer : nullptr;
  auto print = [&](const std::string& line) {
    if (!out) return;
    std::fprintf(out, "%s\n", line.c_str());
    std::fflush(out);
  };
  // Megatron's writer lives on the last rank only.
  std::unique_ptr<tensorboard_writer> tb;
  if (a.training.tensorboard_dir && dp.prints()) {
    tb = std::make_unique<tensorboard_writer>(*a.training.tensorboard_dir);
    for (const auto& [name, value] : config::argument_strings(a)) tb->add_text(name, value, 0);  // write_args_to_tensorboard
  }
  const auto tok = tokenizer_from_args(a);
  const std::int64_t vocab = tok->vocab_size();
  const std::int64_t padded = config::padded_vocab_size(vocab, a);
  print(" > padded vocab (size: " + std::to_string(vocab) + ") with " + std::to_string(padded - vocab) +
        " dummy tokens (new size: " + std::to_string(padded) + ")");

  model::single_group tp;
  model::gpt_model<float> gpt(model_config_from_args(a, padded), tp);

  const auto datasets = data::build_gpt_datasets(dataset_config_from_args(a, *tok), split_sample_counts(a));
  if (!datasets[0]) throw std::runtime_error("the --split gives no training data; give the train split a weight");
  const int mbs = static_cast<int>(*a.training.micro_batch_size);
  const batch_loader train_loader(datasets[0], mbs, padded, dp.rank(), dp.size());
  const bool do_valid = datasets[1] && a.validation.eval_iters > 0;
  const bool do_test = datasets[2] && a.validation.eval_iters > 0;

  auto opt = model::make_optimizer(optimizer_view(gpt, a.learning_rate.decoupled_lr.has_value()), optimizer_options_from_args(a));
  model::lr_scheduler scheduler(model::lr_scheduler_options_from_args(lr_schedule_args_from_args(a)), opt->param_groups());

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
  const std::int64_t replica_step = static_cast<std::int64_t>(mbs) * dp.size();
  std::int64_t iteration = 0;
  while (!a.validation.skip_train && iteration < train_iters) {
    gpt.zero_grad();
    double loss_sum = 0, tokens = 0;
    for (std::int64_t j = 0; j < m; ++j) {
      const auto batch = train_loader.load(result.consumed_train_samples + j * replica_step);
      const double count = mask_sum(batch);
      // Megatron divides each microbatch's loss by its token count and by the microbatch count.
      const float scale = count > 0 ? static_cast<float>(1.0 / (count * static_cast<double>(m))) : 0.0f;
      const auto r = gpt.forward_backward(batch.view(), scale);
      loss_sum += r.loss_sum;
      tokens += r.num_tokens;
    }
    if (data_parallel) {
      // Megatron's DDP: scale by 1/dp, then sum over the replicas, so every replica holds the mean.
      auto grads = gpt.store().grads();
      const float scale = 1.0f / static_cast<float>(dp.size());
      for (float& g : grads) g *= scale;
      data_parallel->all_reduce(grads);
    }
    double reported[2] = {loss_sum, tokens};
    dp.sum(reported);
    loss_sum = reported[0];
    tokens = reported[1];
    const auto step = model::clip_and_step(*opt, a.regularization.clip_grad, a.logging.log_num_zeros_in_grad);
    scheduler.step(gbs);
    result.consumed_train_samples += gbs;
    ++iteration;

    const double lm_loss = tokens > 0 ? loss_sum / tokens : 0.0;
    const double lr = model::logged_learning_rate(opt->param_groups()).value_or(0.0);
    result.lm_loss.push_back(lm_loss);
    result.grad_norm.push_back(step.grad_norm.value_or(0.0));
    result.learning_rate.push_back(lr);
    const std::pair<std::string, float> losses[] = {{"lm loss", static_cast<float>(lm_loss)}};
    log_acc.add_iteration(losses, !step.update_successful);

    const std::optional<double> params_norm =
        a.logging.log_params_norm ? std::optional<double>(model::params_norm(opt->params())) : std::nullopt;
    if (tb && iteration % a.logging.tensorboard_log_interval == 0)
      log_to_tensorboard(*tb, a, iteration, result.consumed_train_samples, lr,
                         model::logged_decoupled_learning_rate(opt->param_groups()), gbs, lm_loss, step, params_norm, dp.size());
    if (iteration % a.training.log_interval == 0) {
      const auto now = clock_type::now();
      model::training_log_inputs in;
      in.timestamp = model::log_timestamp(std::chrono::system_clock::now());
      in.iteration = iteration;
      in.train_iters = train_iters;
      in.consumed_train_samples = result.consumed_train_samples;
      in.interval_seconds = std::chrono::duration<double>(now - interval_start).count();
      in.learning_rate = lr;
      in.decoupled_learning_rate = model::logged_decoupled_learning_rate(opt->param_groups());
      in.global_batch_size = gbs;
      in.world_size = dp.size();
      if (a.logging.log_throughput) in.flops_per_iteration = num_floating_point_operations(a, padded, gbs);
      in.grad_norm = step.grad_norm;
      in.num_zeros_in_grad = step.num_zeros_in_grad;
      in.params_norm = params_norm;
      const auto line = model::training_log_interval(in, log_acc);
      print(line);
      if (tb && a.logging.log_timers_to_tensorboard) {
        const double per_iteration = in.interval_seconds / static_cast<double>(a.training.log_interval);
        tb->add_scalar("iteration-time", per_iteration, iteration);
        if (in.flops_per_iteration) tb->add_scalar("throughput", *in.flops_per_iteration / (per_iteration * 1e12 * dp.size()), iteration);
      }
      if (tb) tb->flush();
      interval_start = clock_type::now();
    }
    if (do_valid && a.validation.eval_interval > 0 && iteration % a.validation.eval_interval == 0) {
      const batch_loader valid(datasets[1], mbs, padded, dp.rank(), dp.size());
      report_validation(out, tb.get(), a, "iteration " + std::to_string(iteration),
                        evaluate(gpt, valid, consumed_valid, a.validation.eval_iters, gbs, mbs, dp), iteration,
                        result.consumed_train_samples);
    }
    if (a.training.exit_duration_in_mins.value_or(0) != 0) {  // Python truthiness: 0 means off
      // Every replica stops at the same iteration: one past the limit is enough (Megatron's MAX all-reduce).
      const double minutes = std::chrono::duration<double>(clock_type::now() - train_start).count() / 60.0;
      double over[1] = {minutes > static_cast<double>(*a.training.exit_duration_in_mins) ? 1.0 : 0.0};
      dp.sum(over);
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
    const batch_loader valid(datasets[1], mbs, padded, dp.rank(), dp.size());
    report_validation(out, tb.get(), a, "iteration " + std::to_string(iteration) + " on validation set",
                      evaluate(gpt, valid, consumed_valid, a.validation.eval_iters, gbs, mbs, dp), iteration,
                      result.consumed_train_samples);
  }
  if (do_test) {
    const batch_loader test(datasets[2], mbs, padded, dp.rank(), dp.size());
    std::int64_t consumed_test = 0;
    report_validation(out, tb.get(), a, "iteration " + std::to_string(iteration) + " on test set",
                      evaluate(gpt, test, consumed_test, a.validation.eval_iters, gbs, mbs, dp), iteration,
                      result.consumed_train_samples);
  }
  return result;
}

}  // namespace mactor::training
