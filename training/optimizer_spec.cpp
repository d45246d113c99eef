// Megatron's flags as the optimizer's inputs: the optimizer, its learning-rate and weight-decay
// schedule and the fp16/bf16 loss scaler (declared in model_spec.hpp).
#include <stdexcept>

#include "training/model_spec.hpp"

namespace mactor::training {

model::optimizer_options optimizer_options_from_args(const config::megatron_args& a) {
  model::optimizer_options o;
  const auto kind = model::parse_optimizer_kind(a.training.optimizer);
  if (!kind) throw std::invalid_argument("--optimizer " + a.training.optimizer + " is not one of adam, sgd");
  o.optimizer = *kind;
  o.lr = *a.learning_rate.lr;
  o.min_lr = a.learning_rate.min_lr;
  o.decoupled_lr = a.learning_rate.decoupled_lr;
  o.decoupled_min_lr = a.learning_rate.decoupled_min_lr;
  o.weight_decay = a.regularization.weight_decay;
  o.adam_beta1 = a.regularization.adam_beta1;
  o.adam_beta2 = a.regularization.adam_beta2;
  o.adam_eps = a.regularization.adam_eps;
  o.sgd_momentum = a.regularization.sgd_momentum;
  // --use-precision-aware-optimizer: TE FusedAdam's moment dtypes (validation mapped the flags to
  // torch dtype names; they stay fp32 without the flag). --optimizer-cpu-offload builds Megatron's
  // HybridDeviceOptimizer instead, whose torch Adam/SGD keep fp32 moments whatever they say.
  if (a.training.optimizer_cpu_offload) return o;
  o.exp_avg_dtype = model::parse_state_dtype(a.experimental.exp_avg_dtype).value_or(model::state_dtype::fp32);
  o.exp_avg_sq_dtype = model::parse_state_dtype(a.experimental.exp_avg_sq_dtype).value_or(model::state_dtype::fp32);
  return o;
}

model::lr_schedule_args lr_schedule_args_from_args(const config::megatron_args& a) {
  model::lr_schedule_args s;
  const auto& lr = a.learning_rate;
  s.train_iters = a.training.train_iters;
  s.train_samples = a.training.train_samples;
  s.global_batch_size = *a.training.global_batch_size;
  s.lr = lr.lr;
  s.min_lr = lr.min_lr;
  s.lr_warmup_init = lr.lr_warmup_init;
  s.lr_warmup_fraction = lr.lr_warmup_fraction;
  s.lr_warmup_iters = lr.lr_warmup_iters;
  s.lr_warmup_samples = lr.lr_warmup_samples;
  s.lr_decay_iters = lr.lr_decay_iters;
  s.lr_decay_samples = lr.lr_decay_samples;
  s.lr_decay_style = lr.lr_decay_style;
  s.lr_wsd_decay_iters = lr.lr_wsd_decay_iters;
  s.lr_wsd_decay_samples = lr.lr_wsd_decay_samples;
  s.lr_wsd_decay_style = lr.lr_wsd_decay_style;
  s.weight_decay = a.regularization.weight_decay;
  s.start_weight_decay = a.regularization.start_weight_decay;
  s.end_weight_decay = a.regularization.end_weight_decay;
  s.weight_decay_incr_style = a.regularization.weight_decay_incr_style;
  s.use_checkpoint_opt_param_scheduler = lr.use_checkpoint_opt_param_scheduler;
  s.override_opt_param_scheduler = lr.override_opt_param_scheduler;
  return s;
}

std::optional<model::grad_scaler_options> grad_scaler_options_from_args(const config::megatron_args& a) {
  const auto& m = a.mixed_precision;
  if (!m.fp16 && !m.bf16) return std::nullopt;
  model::grad_scaler_options o;
  if (m.loss_scale) {
    o.dynamic = false;
    o.initial_scale = static_cast<float>(*m.loss_scale);
    return o;
  }
  if (!m.fp16) return std::nullopt;
  o.initial_scale = static_cast<float>(m.initial_loss_scale);
  o.min_scale = static_cast<float>(m.min_loss_scale);
  o.growth_interval = static_cast<std::int64_t>(m.loss_scale_window);
  o.hysteresis = m.hysteresis;
  return o;
}

}  // namespace mactor::training
