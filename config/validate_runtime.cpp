// Rules Megatron applies at runtime (118-133 of shared/megatron/validation.md): microbatches, parallel
// state, schedules and the LR scheduler, checked up front so that a bad job never starts.
#include "config/microbatches.hpp"
#include "config/python_text.hpp"
#include "config/validation_context.hpp"

namespace mactor::config::detail {
namespace {

std::optional<batch_rampup> parse_rampup(validation_context& c) {  // rule 119
  const auto& r = c.a.training.rampup_batch_size;
  if (!r) return std::nullopt;
  if (!c.require(r->size() == 3, "--rampup-batch-size expects 3 values: <start batch size> <batch size increment> "
                                 "<ramp-up samples>, got " + show(r->size())))
    return std::nullopt;
  std::int64_t v[3];
  for (int i = 0; i < 3; ++i) {
    auto parsed = parse_python_int((*r)[static_cast<std::size_t>(i)]);
    if (!c.require(parsed.has_value(), "--rampup-batch-size: '" + (*r)[static_cast<std::size_t>(i)] + "' is not an integer"))
      return std::nullopt;
    v[i] = *parsed;
  }
  const std::int64_t gbs = c.a.training.global_batch_size.value_or(0);
  bool ok = c.require(v[0] > 0, "--rampup-batch-size start batch size must be > 0 (got " + show(v[0]) + ")");
  ok &= c.require(v[1] > 0, "--rampup-batch-size batch size increment must be > 0 (got " + show(v[1]) + ")");
  ok &= c.require(v[2] >= 0, "--rampup-batch-size ramp-up samples must be >= 0 (got " + show(v[2]) + ")");
  ok &= c.require(gbs > v[0],
                  "--global-batch-size=" + show(gbs) + " must be larger than the --rampup-batch-size start " + show(v[0]));
  if (ok)
    ok &= c.require((gbs - v[0]) % v[1] == 0, "--global-batch-size=" + show(gbs) + " minus the ramp-up start " + show(v[0]) +
                                                  " must be a multiple of the increment " + show(v[1]));
  if (!ok) return std::nullopt;
  return batch_rampup{v[0], v[1], v[2]};
}

void microbatches(validation_context& c) {  // rules 118-120
  const auto& t = c.a.training;
  if (!t.micro_batch_size || !t.global_batch_size || *t.micro_batch_size <= 0 || *t.global_batch_size <= 0) return;
  microbatch_plan plan{*t.micro_batch_size, c.a.derived.data_parallel_size, *t.global_batch_size, parse_rampup(c),
                       t.decrease_batch_size_if_needed};
  if (t.rampup_batch_size && !plan.rampup) return;
  const std::int64_t unit = plan.micro_batch_size * plan.data_parallel_size;
  if (!plan.rampup && !plan.decrease_batch_size_if_needed) {
    if (!c.require(plan.global_batch_size % unit == 0,
                   "--global-batch-size=" + show(plan.global_batch_size) + " is not divisible by --micro-batch-size=" +
                       show(plan.micro_batch_size) + " x data-parallel size " + show(plan.data_parallel_size) + " = " + show(unit) +
                       "\n  use a multiple of " + show(unit) + " (e.g. " + show(std::max(unit, plan.global_batch_size / unit * unit)) + ")"))
      return;
  }
  if (plan.rampup && !plan.decrease_batch_size_if_needed) {
    c.require(plan.rampup->start % unit == 0, "--rampup-batch-size start " + show(plan.rampup->start) + " must be divisible by "
                                              "--micro-batch-size x data-parallel size = " + show(unit));
    // Megatron's calculator asserts this at the first ramp step; found here before training starts.
    c.require(plan.rampup->increment % unit == 0,
              "--rampup-batch-size increment " + show(plan.rampup->increment) + " must be divisible by --micro-batch-size x "
              "data-parallel size = " + show(unit) + " (every batch of the ramp must be), or give --decrease-batch-size-if-needed");
  }
  c.a.derived.num_microbatches = plan.num_microbatches(plan.rampup ? plan.rampup->samples + 1 : 0);
  c.require(c.a.derived.num_microbatches >= 1, "the global batch size gives no microbatch; raise --global-batch-size to at least " + show(unit));
  if (plan.rampup && t.train_samples) c.a.training.train_iters = plan.train_iters_for_samples(*t.train_samples);
  else if (t.train_samples) c.a.training.train_iters = *t.train_samples / plan.global_batch_size;  // rule 128
}

void parallel_state(validation_context& c) {  // rules 121, 123, 124
  const auto& d = c.a.distributed;
  if (c.a.derived.virtual_pipeline_model_parallel_size && d.pipeline_model_parallel_size <= 1)
    c.error("pipeline-model-parallel size should be greater than 1 with interleaved schedule");
  const std::int64_t etp = c.a.moe.expert_tensor_parallel_size.value_or(d.tensor_model_parallel_size);
  const std::int64_t ep = c.a.moe.expert_model_parallel_size;
  const std::int64_t expert_model = etp * ep * d.pipeline_model_parallel_size;
  const std::int64_t w = c.a.derived.world_size;
  const std::int64_t dense = d.tensor_model_parallel_size * d.pipeline_model_parallel_size * d.context_parallel_size;
  if (dense <= 0 || w % dense != 0) return;  // already reported as rule 8
  if (expert_model > 0 && !c.require(w % expert_model == 0,
                                     "world size " + show(w) + " is not divisible by --expert-tensor-parallel-size x "
                                     "--expert-model-parallel-size x --pipeline-model-parallel-size = " + show(expert_model)))
    return;
  if (d.use_tp_pp_dp_mapping && d.pipeline_model_parallel_size > 1 && expert_model > 0)
    c.require(w / expert_model == c.a.derived.data_parallel_size,
              "with --use-tp-pp-dp-mapping the expert data-parallel size (" + show(w / expert_model) +
                  ") must equal the data-parallel size (" + show(c.a.derived.data_parallel_size) + ")");
  const std::int64_t instances = d.num_distributed_optimizer_instances;
  const std::int64_t dpcp = c.a.derived.data_parallel_size * d.context_parallel_size;
  if (!c.require(instances > 0 && dpcp % instances == 0, "data-parallel x context-parallel size (" + show(dpcp) +
                                                        ") must be divisible by --num-distributed-optimizer-instances=" + show(instances)))
    return;
  // Megatron's initialize_model_parallel asserts it as it splits the expert-data-parallel group.
  const std::int64_t expert_dp = expert_model > 0 ? w / expert_model : dpcp;
  c.require(expert_dp % instances == 0,
            "the expert data-parallel size (world " + show(w) + " / (--expert-tensor-parallel-size x "
            "--expert-model-parallel-size x --pipeline-model-parallel-size) = " + show(expert_dp) +
                ") must be divisible by --num-distributed-optimizer-instances=" + show(instances) +
                "; use fewer instances or more ranks");
}

void interleaved_schedule(validation_context& c) {  // rule 127
  const auto& vp = c.a.derived.virtual_pipeline_model_parallel_size;
  if (!vp) return;
  const std::int64_t pp = c.a.distributed.pipeline_model_parallel_size;
  const std::int64_t g = c.a.distributed.microbatch_group_size_per_vp_stage.value_or(pp);
  const std::int64_t m = c.a.derived.num_microbatches;
  c.require(pp <= g && g <= m, "--microbatch-group-size-per-virtual-pipeline-stage=" + show(g) + " must be between "
                               "--pipeline-model-parallel-size=" + show(pp) + " and the number of microbatches " + show(m));
  c.require(m % g == 0 || m % g >= pp, "the number of microbatches (" + show(m) + ") modulo the microbatch group size (" +
                                           show(g) + ") must be 0 or at least --pipeline-model-parallel-size=" + show(pp) +
                                           "; change --global-batch-size so that it is a multiple of " + show(g));
}

void lr_scheduler(validation_context& c) {  // rules 129, 130
  const auto& t = c.a.training;
  const auto& lr = c.a.learning_rate;
  if (!c.require(t.train_iters || t.train_samples, "either --train-iters or --train-samples must be provided")) return;
  if (!c.require(lr.lr.has_value(), "--lr is required (e.g. --lr 3e-4)")) return;
  const double max_lr = *lr.lr;
  c.require(lr.min_lr >= 0.0, "--min-lr=" + python_float_repr(lr.min_lr) + " must be >= 0");
  c.require(lr.lr_warmup_init <= max_lr, "--lr-warmup-init=" + python_float_repr(lr.lr_warmup_init) + " must be <= --lr=" +
                                             python_float_repr(max_lr));
  const std::int64_t gbs = t.global_batch_size.value_or(1);
  double decay_steps = 0, warmup_steps = 0;
  std::optional<double> wsd_steps;
  if (t.train_iters && !t.train_samples) {
    decay_steps = double(lr.lr_decay_iters.value_or(*t.train_iters)) * double(gbs);
    warmup_steps = lr.lr_warmup_fraction ? *lr.lr_warmup_fraction * decay_steps : double(lr.lr_warmup_iters * gbs);
    if (lr.lr_wsd_decay_iters) wsd_steps = double(*lr.lr_wsd_decay_iters * gbs);
  } else {
    decay_steps = double(lr.lr_decay_samples.value_or(t.train_samples.value_or(0)));
    warmup_steps = lr.lr_warmup_fraction ? *lr.lr_warmup_fraction * decay_steps : double(lr.lr_warmup_samples);
    if (lr.lr_wsd_decay_samples) wsd_steps = double(*lr.lr_wsd_decay_samples);
  }
  if (!c.require(decay_steps > 0, "the LR decay length must be > 0: check --lr-decay-iters/--lr-decay-samples and --train-iters"))
    return;
  c.require(warmup_steps < decay_steps, "LR warmup (" + show(warmup_steps) + " samples) must be shorter than LR decay (" +
                                            show(decay_steps) + " samples); lower --lr-warmup-iters/--lr-warmup-fraction");
  if (lr.lr_decay_style == "WSD")
    c.require(wsd_steps.has_value(), "--lr-decay-style WSD needs --lr-wsd-decay-iters (or --lr-wsd-decay-samples)");
  const auto& r = c.a.regularization;
  if (r.start_weight_decay && r.end_weight_decay) {
    c.require(*r.start_weight_decay >= 0.0, "--start-weight-decay must be >= 0");
    c.require(*r.end_weight_decay >= *r.start_weight_decay, "--end-weight-decay must be >= --start-weight-decay");
  }
  c.require(!(lr.override_opt_param_scheduler && lr.use_checkpoint_opt_param_scheduler),
            "both override and use-checkpoint are set: give only one of --override-opt-param-scheduler and "
            "--use-checkpoint-opt-param-scheduler");
}

void vocabulary(validation_context& c) {  // rule 133, where the vocabulary is known without reading files
  auto& tok = c.a.tokenizer;
  if (tok.padded_vocab_size || !tok.tokenizer_type || *tok.tokenizer_type != "NullTokenizer") return;
  if (c.require(tok.vocab_size.has_value(), "--tokenizer-type NullTokenizer needs --vocab-size"))
    tok.padded_vocab_size = padded_vocab_size(*tok.vocab_size + 1, c.a);  // NullTokenizer adds an EOD id
}

// --profile (training.py's profiler): torch.profiler's schedule asserts active = end - start > 0,
// and a rank outside the job is one Megatron silently never profiles: both refused here.
void profiling(validation_context& c) {
  const auto& t = c.a.training;
  if (!t.profile) {
    if (t.use_pytorch_profiler) c.warn("--use-pytorch-profiler has no effect without --profile");
    return;
  }
  c.require(t.profile_step_start >= 0, "--profile-step-start must be >= 0 (got " + show(t.profile_step_start) + ")");
  c.require(t.profile_step_end > t.profile_step_start,
            "--profile-step-end (" + show(t.profile_step_end) + ") must be greater than --profile-step-start (" +
                show(t.profile_step_start) + "): the profiled iterations are [start, end)");
  const std::int64_t world = c.a.derived.world_size;
  for (const auto r : t.profile_ranks)
    c.require(r >= 0 && r < world, "--profile-ranks " + show(r) + " is not a rank of this job (ranks 0.." +
                                       show(world - 1) + "); list global ranks, e.g. --profile-ranks 0 " +
                                       show(world - 1));
  const auto first = t.use_pytorch_profiler ? t.profile_step_start : t.profile_step_start + 1;
  if (t.train_iters && first > *t.train_iters)
    c.warn("--profile: the profiled iterations start at " + show(first) + ", after the last (--train-iters " +
           show(*t.train_iters) + "): nothing is traced");
}

// torch's timedelta would take a zero or negative timeout and fail every collective at once; a
// hang rule with one would end every job at its first report: refused, naming the fix.
void distributed_timeouts(validation_context& c) {
  const auto& d = c.a.distributed;
  c.require(d.distributed_timeout_minutes > 0, "--distributed-timeout-minutes must be > 0 (got " +
                                                   show(d.distributed_timeout_minutes) +
                                                   "): it is how long a rank may make no progress (default 10)");
  if (d.distributed_timeout_seconds_after_init)
    c.require(*d.distributed_timeout_seconds_after_init > 0,
              "--distributed-timeout-seconds-after-init must be > 0 (got " +
                  show(*d.distributed_timeout_seconds_after_init) + "); leave it out to keep --distributed-timeout-minutes");
}

// --enable-ft-package keeps its timeouts (ft_state.json) in the --save folder, as Megatron's
// ft_integration.setup, which raises without it.
void fault_tolerance(validation_context& c) {
  if (c.a.ft_package.enable_ft_package)
    c.require(c.a.checkpointing.save.has_value(),
              "--enable-ft-package needs --save: the fault-tolerance timeouts are kept in <save>/ft_state.json "
              "(checkpointing save dir must be set to enable fault tolerance); add --save DIR");
}

// --straggler-ctrlr-port: a TCP port (Megatron would only warn that its socket cannot bind).
void straggler_detector(validation_context& c) {
  const auto& s = c.a.straggler_detector;
  if (!s.log_straggler) return;
  c.require(s.straggler_ctrlr_port > 0 && s.straggler_ctrlr_port < 65536,
            "--straggler-ctrlr-port must be a TCP port, 1 to 65535 (got " + show(s.straggler_ctrlr_port) + ")");
}

}  // namespace

void validate_runtime(validation_context& c) {
  distributed_timeouts(c);
  fault_tolerance(c);
  straggler_detector(c);
  microbatches(c);
  parallel_state(c);
  interleaved_schedule(c);
  lr_scheduler(c);
  vocabulary(c);
  profiling(c);
}

}  // namespace mactor::config::detail
