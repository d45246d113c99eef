// One rank's training work: data, engine, LR schedule; iterations and evaluations as pumped jobs.
#include "training/rank_worker.hpp"

#include "training/exit_signal.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/layout.hpp"
#include "config/pipeline_placement.hpp"
#include "config/validate.hpp"
#include "tensor/memory_history.hpp"
#include "training/training_log.hpp"
#include "training/memory_snapshot.hpp"
#include "training/model_spec.hpp"

namespace mactor::training {

namespace {

vocabulary vocabulary_of(const data::tokenizer& tok, const config::megatron_args& a) {
  vocabulary v;
  v.size = tok.vocab_size();
  // Megatron pads only when --padded-vocab-size is not given (NullTokenizer's is derived in validation).
  v.padded = a.tokenizer.padded_vocab_size.value_or(config::padded_vocab_size(v.size, a));
  return v;
}

// --rerun-mode and its flags; Megatron's rank-0 lines come from the last stage's first rank
// (the ranks that validate the loss).
rerun_options rerun_options_of(const config::megatron_args& a, parallel_context& ctx) {
  rerun_options o;
  o.mode = a.rerun_machine.rerun_mode == "disabled" ? rerun_mode::disabled : rerun_mode::validate_results;
  o.error_injection_rate = a.rerun_machine.error_injection_rate;
  const auto& type = a.rerun_machine.error_injection_type;
  o.error_injection_type = type == "correct_result"     ? rerun_diagnostic::correct_result
                           : type == "persistent_error" ? rerun_diagnostic::persistent_error
                                                        : rerun_diagnostic::transient_error;
  o.tracker_filename = a.training.result_rejected_tracker_filename;
  o.rank = ctx.rank();
  o.device = ctx.local_rank();
  const auto c = ctx.groups().coords();
  // The rank of the loss's pipeline stage (rank 0 under ZB-V's V).
  const int pp = ctx.groups().pp(), vp = static_cast<int>(a.derived.virtual_pipeline_model_parallel_size.value_or(1));
  const int loss_rank =
      config::position_of_stage(config::placement_for_schedule(a.mactor.pipeline_schedule), pp, pp * vp - 1).rank;
  o.logs_for_job = c.pp == loss_rank && c.tp == 0 && c.cp == 0 && c.dp == 0;
  o.seed = static_cast<std::uint64_t>(a.initialization.seed) * 1000003u + static_cast<std::uint64_t>(ctx.rank());
  return o;
}

void print_rerun_line(const std::string& level, const std::string& text) {
  std::fprintf(stderr, "%s:megatron.core.rerun_state_machine:%s\n", level.c_str(), text.c_str());
  std::fflush(stderr);
}

}  // namespace

vocabulary vocabulary_from_args(const config::megatron_args& a) { return vocabulary_of(*tokenizer_from_args(a), a); }

namespace {
// Megatron starts --record-memory-history (PyTorch's trace of 100000 allocations) before it
// builds the model; so does this, before the tokenizer, the datasets and the engine.
std::unique_ptr<data::tokenizer> tokenizer_after_recording(const config::megatron_args& a) {
  if (a.training.record_memory_history) tensor::start_memory_history(100000);
  return tokenizer_from_args(a);
}
}  // namespace

rank_worker::rank_worker(const config::megatron_args& a, parallel_context& ctx)
    : rank_worker(a, ctx, tokenizer_after_recording(a)) {}

rank_worker::rank_worker(const config::megatron_args& a, parallel_context& ctx, std::unique_ptr<data::tokenizer> tok)
    : args_(a), ctx_(ctx), vocab_(vocabulary_of(*tok, a)), data_(datasets_from_args(a, *tok, ctx)),
      engine_(a, ctx, vocab_.padded),
      scheduler_(model::lr_scheduler_options_from_args(lr_schedule_args_from_args(a)), engine_.optimizer().param_groups()),
      batches_(config::microbatch_plan_of(a)), validation_(rerun_options_of(a, ctx), print_rerun_line) {
  // One meter per host: package counters cover every rank on it.
  if (a.logging.log_energy && ctx.local_rank() == 0)
    energy_ = std::make_unique<energy_meter>();
  const int mbs = static_cast<int>(*a.training.micro_batch_size);
  auto loader_of = [&](std::shared_ptr<data::sample_dataset> d) {
    return std::make_unique<batch_loader>(std::move(d), mbs, vocab_.padded, ctx.dp_rank(), ctx.groups().dp());
  };
  if (data_.train) train_loader_ = loader_of(data_.train);
  if (data_.test) test_loader_ = loader_of(data_.test);
  for (auto& v : data_.valid) valid_loaders_.push_back(loader_of(v));
  if (const auto& save = a.checkpointing.save; save && ctx.rank() == 0) {
    // A --save that cannot be written is found now, not after hours of training; leftovers of
    // saves a crash interrupted are removed before this job's ranks can save.
    std::error_code ec;
    std::filesystem::create_directories(*save, ec);
    if (ec || access(save->c_str(), W_OK) != 0)
      throw checkpoint::checkpoint_error("--save " + *save + " is not a writable directory" +
                                         (ec ? " (" + ec.message() + ")" : std::string()) + "; pass a path you can write to");
    checkpoint::remove_interrupted_saves(*save);
  }
  if (a.training.record_memory_history && ctx.rank() == ctx.world_size() - 1) {
    // Found now rather than at the first log line: the folder the snapshot goes to.
    const auto folder = std::filesystem::absolute(a.training.memory_snapshot_path).parent_path();
    if (!std::filesystem::is_directory(folder) || access(folder.c_str(), W_OK) != 0)
      throw checkpoint::checkpoint_error("--memory-snapshot-path " + a.training.memory_snapshot_path + ": " +
                                         folder.string() + " is not a writable folder; pass a path in one");
  }
}

std::optional<loaded_checkpoint> rank_worker::load_checkpoint() {
  auto loaded = training::load_checkpoint(args_, ctx_, engine_, scheduler_);
  if (loaded) eval_consumed_[1] = loaded->position.consumed_valid_samples;
  return loaded;
}

checkpoint::rank_state rank_worker::capture_checkpoint(std::int64_t iteration, std::int64_t consumed,
                                                       std::int64_t skipped, double floating_point_operations,
                                                       bool non_persistent, checkpoint::snapshot_buffers* buffers) {
  training_position at;
  at.iteration = iteration;
  at.consumed_train_samples = consumed;
  at.skipped_train_samples = skipped;
  at.floating_point_operations = floating_point_operations;
  at.consumed_valid_samples = eval_consumed_[1];
  if (const auto& to = args_.checkpointing.ckpt_convert_format) {
    // --ckpt-convert-format: loaded in --ckpt-format, the one save before the job exits is in this.
    auto converting = args_;
    converting.checkpointing.ckpt_format = *to;
    return training::capture_checkpoint(converting, ctx_, engine_, scheduler_, at, vocab_.padded, false, buffers);
  }
  const bool local = non_persistent && args_.checkpointing.non_persistent_ckpt_type == std::optional<std::string>("local");
  return training::capture_checkpoint(args_, ctx_, engine_, scheduler_, at, vocab_.padded, local, buffers);
}

void rank_worker::begin_iteration(std::int64_t iteration, std::int64_t consumed) {
  if (!train_loader_) throw std::logic_error("no training data to iterate over");
  iteration_ = iteration;
  eval_split_ = 0;
  started_ = std::chrono::steady_clock::now();
  engine_.trace().begin_iteration(iteration);
  forward_backward_start_ = std::chrono::steady_clock::now();
  if (energy_) energy_->lap();  // evaluations and saves between steps are not counted, as Megatron pauses
  // Megatron's update_num_microbatches(consumed) before each train step.
  const std::int64_t microbatches = batches_.num_microbatches(consumed);
  iteration_batch_ = microbatches * batches_.micro_batch_size * batches_.data_parallel_size;
  consumed_ = consumed;
  microbatches_ = static_cast<int>(microbatches);
  concluded_ = false;
  validation_.should_run_forward_backward({});  // the initial run: never agrees anything
  // Megatron checks in every attention forward; the weights only change at the optimizer step.
  if (args_.validation.test_mode) engine_.check_qk_norms();
  begin_schedule_of_iteration();
}

// One run of the iteration's forward-backward: zeroed gradients, the same micro-batches (their
// dropout masks follow their sample index, so a rerun draws the same ones).
void rank_worker::begin_schedule_of_iteration() {
  engine_.zero_grad();
  engine_.begin_schedule(/*forward_only=*/false, *train_loader_, consumed_, microbatches_, false);
}

// pretrain_gpt.py's loss_func checks, on each micro-batch's local loss sum in order.
void rank_worker::validate_losses() {
  const bool nan_check = args_.training.check_for_nan_in_loss_and_grad;
  for (const double local : engine_.microbatch_losses()) {
    const double loss = static_cast<float>(local);  // Megatron's loss is an fp32 tensor
    if (nan_check) {
      validation_.validate_result(loss, [](double v) { return std::isnan(v); },
                                  "found NaN in local forward loss calculation", 0.0, true);
      validation_.validate_result(loss, [](double v) { return std::isinf(v); },
                                  "found Inf in local forward loss calculation", 0.0, true);
    }
    if (args_.training.check_for_spiky_loss)
      validation_.validate_result(
          loss, [this](double v) { return validation_.is_unexpectedly_large(v, spiky_loss_factor, "loss"); },
          "Spiky loss", 0.0, false);
  }
}

// Megatron's check_grads with --check-for-large-grads: each bucket's local gradient norm, before
// the data-parallel collective, against 10x the largest of the first 100 (non-fatal: a rerun).
void rank_worker::validate_grads() {
  const auto norms = engine_.take_local_grad_norms();
  for (std::size_t i = 0; i < norms.size(); ++i)
    validation_.validate_result(
        norms[i], [this](double v) { return validation_.is_unexpectedly_large(v, large_grads_factor, "grads"); },
        "found unexpected large grads in bucket #" + std::to_string(i) +
            " in backward pass before data-parallel communication collective",
        0.001, false);
}

bool rank_worker::rerun_iteration() {
  validate_losses();
  engine_.finalize_grads();
  validate_grads();
  // Every rank takes the same decision: the flags are summed over the world.
  const bool again = validation_.should_run_forward_backward([this](int flag) {
    double sum = flag;
    if (auto* world = ctx_.world()) world->all_reduce(std::span<double>(&sum, 1));
    return static_cast<int>(sum);
  });
  if (again) begin_schedule_of_iteration();
  concluded_ = !again;
  return again;
}

bool rank_worker::pump() {
  while (engine_.pump()) {
    if (eval_split_ == 0) return true;
    eval_totals_.loss_sum += engine_.loss_totals().loss_sum;
    eval_totals_.num_tokens += engine_.loss_totals().num_tokens;
    if (!begin_next_eval_pass()) return true;
  }
  return false;
}

// Whether the logger can use this iteration's memory: Megatron's report after the first log
// line, and --log-memory-to-tensorboard's scalars at each TensorBoard interval. Reading it costs
// a /proc read and a larger report, so other iterations go without.
bool rank_worker::memory_wanted() const {
  const auto& l = args_.logging;
  return (!memory_logged_ && iteration_ % args_.training.log_interval == 0) ||
         (l.log_memory_to_tensorboard && iteration_ % l.tensorboard_log_interval == 0);
}

// --log-straggler: Megatron times each micro-batch's model call (not its get_batch) and, apart,
// the batch loads; here the forward spans of the schedule just run, less the loads made inside them.
straggler_sample rank_worker::straggler_sample_now() const {
  double forward_s = 0;
  for (const auto& e : engine_.last_timeline())
    if (e.what.kind == schedules::op::forward && !e.waiting) forward_s += e.end_s - e.start_s;
  const auto loads = engine_.batch_loads();
  return {ctx_.rank(), 1e3 * std::max(0.0, forward_s - loads.total), 1e3 * loads.longest};
}

iteration_report rank_worker::finish_iteration() {
  if (!concluded_) throw std::logic_error("finish_iteration before rerun_iteration said the iteration's runs are done");
  if (const auto end = validation_.should_checkpoint_and_exit(); end.exit) {
    iteration_report r;  // Megatron's train_step returns before the optimizer step
    r.rank = ctx_.rank();
    r.iteration = iteration_;
    r.rerun_exit_code = end.exit_code;
    r.rerun_checkpoint = end.checkpoint;
    return r;
  }
  // Megatron's forward-backward timer spans the schedule and finalize_model_grads.
  engine_.timers().add(step_timer::forward_backward, forward_backward_start_);
  // The loss lives on the last pipeline stage; sum it over the replicas there.
  const auto totals = [&] {
    const trace_recorder::scope traced(engine_.trace(), "loss all-reduce", "step");
    return sum_over_replicas(ctx_, engine_.loss_totals());
  }();
  // Megatron's reduce_aux_losses_tracker_across_ranks: the mean over the data-parallel group,
  // before the optimizer step, whose --overlap-param-gather all-gather then runs on that group
  // in the background.
  auto moe_losses = engine_.moe_aux_losses();
  const int dp_cp = ctx_.data_parallel() ? ctx_.data_parallel()->size() : 1;
  if (auto* dp = ctx_.data_parallel(); dp && !moe_losses.empty()) {
    dp->all_reduce(std::span<double>(moe_losses));
    for (auto& v : moe_losses) v /= dp_cp;
  }
  // The replica then sums its tensor- and context-parallel ranks' values: Megatron's tp_cp
  // reduction of the load-balancing losses. global_aux_loss's is over tp x dp x cp: its data-
  // parallel sum is kept, each context-parallel rank's share divided by cp. The z-loss has none:
  // Megatron logs its mean over data x context parallel on the last rank, so the last
  // tensor-parallel rank's values count, each context-parallel rank's divided by cp.
  if (!moe_losses.empty()) {
    const int cp = ctx_.groups().cp(), tp = ctx_.groups().tp();
    const bool last_tp = ctx_.tp_rank() == tp - 1;
    const std::size_t n = moe_losses.size() / model::moe_aux_loss_kinds;
    for (std::size_t i = 2 * n; i < 3 * n; ++i) moe_losses[i] *= double(dp_cp) / cp;
    for (std::size_t i = 3 * n; i < 4 * n; ++i) moe_losses[i] = last_tp ? moe_losses[i] / cp : 0.0;
  }
  // Megatron's MTPLossLoggingHelper.reduce_loss_in_tracker: the mean over the data-parallel group.
  auto mtp_losses = engine_.mtp_losses();
  if (auto* dp = ctx_.data_parallel(); dp && !mtp_losses.empty()) {
    dp->all_reduce(std::span<double>(mtp_losses));
    for (auto& v : mtp_losses) v /= dp->size();
  }
  if (ctx_.tp_rank() != 0) mtp_losses.clear();
  const auto step = engine_.optimizer_step(args_.regularization.clip_grad, args_.logging.log_num_zeros_in_grad);
  // A skipped step (fp16 overflow) leaves the schedule where it is, as Megatron's train_step does.
  if (step.update_successful) scheduler_.step(iteration_batch_);
  iteration_report r;
  r.rank = ctx_.rank();
  r.iteration = iteration_;
  r.has_loss = engine_.is_last_stage();
  r.loss_sum = totals.loss_sum;
  r.num_tokens = totals.num_tokens;
  r.update_successful = step.update_successful;
  r.moe_losses = std::move(moe_losses);
  r.mtp_losses = std::move(mtp_losses);
  r.loss_scale = engine_.loss_scale();
  if (step.grad_norm) r.has_grad_norm = true, r.grad_norm = *step.grad_norm;
  if (step.num_zeros_in_grad) r.has_num_zeros = true, r.num_zeros = *step.num_zeros_in_grad;
  if (args_.logging.log_params_norm) r.has_params_norm = true, r.params_norm = engine_.params_norm();
  r.learning_rate = model::logged_learning_rate(engine_.optimizer().param_groups()).value_or(0.0);
  if (auto d = model::logged_decoupled_learning_rate(engine_.optimizer().param_groups()))
    r.has_decoupled_learning_rate = true, r.decoupled_learning_rate = *d;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  r.global_batch_size = iteration_batch_;
  r.exit_signal = args_.training.exit_signal_handler && exit_signal_received();
  if (energy_) {
    r.energy_joules = energy_->lap();
    r.energy_missing = !energy_->available();
  }
  if (auto seconds = engine_.timers().take(); !seconds.empty()) r.timings.push_back({ctx_.rank(), std::move(seconds)});
  if (args_.straggler_detector.log_straggler) r.straggler.push_back(straggler_sample_now());
  if (memory_wanted()) {
    r.memory.push_back(read_rank_memory(ctx_.rank(), ctx_.dp_rank() == 0, engine_.device()));
    if (iteration_ % args_.training.log_interval == 0) memory_logged_ = true;
  }
  // Megatron's train loop: every replica's weights compared by hash at the interval.
  if (const auto& every = args_.training.check_weight_hash_across_dp_replicas_interval;
      every && *every > 0 && iteration_ % *every == 0) {
    engine_.check_weight_hashes_across_replicas();
    if (ctx_.rank() == 0) {
      std::printf(">>> Weight hashes match after %lld iterations...\n", static_cast<long long>(iteration_));
      std::fflush(stdout);
    }
  }
  // Megatron's training_log: the last rank dumps the memory snapshot at every log interval.
  if (args_.training.record_memory_history && iteration_ % args_.training.log_interval == 0 &&
      ctx_.rank() == ctx_.world_size() - 1)
    write_memory_snapshot(args_.training.memory_snapshot_path);
  // --profile: the iteration's span; the trace file once the window (or the run) ends.
  engine_.trace().end_iteration(started_, args_.training.train_iters && iteration_ >= *args_.training.train_iters);
  return r;
}

}  // namespace mactor::training
