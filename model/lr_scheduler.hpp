// Learning-rate and weight-decay schedule: Megatron-Core's OptimizerParamScheduler (core_v0.15.0),
// counted in samples, plus the translation from Megatron's flags (get_optimizer_param_scheduler).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/optimizer_param.hpp"

namespace mactor::model {

enum class lr_decay_style { constant, linear, cosine, inverse_square_root, wsd };
enum class lr_wsd_decay_style { exponential, linear, cosine, minus_sqrt };
enum class weight_decay_incr_style { constant, linear, cosine };

/// Megatron's spellings: constant, linear, cosine, inverse-square-root, WSD.
std::optional<lr_decay_style> parse_lr_decay_style(std::string_view text);
/// exponential, linear, cosine, minus_sqrt.
std::optional<lr_wsd_decay_style> parse_lr_wsd_decay_style(std::string_view text);
/// constant, linear, cosine.
std::optional<weight_decay_incr_style> parse_weight_decay_incr_style(std::string_view text);
std::string_view to_string(lr_decay_style style);
std::string_view to_string(lr_wsd_decay_style style);
std::string_view to_string(weight_decay_incr_style style);

/// The scheduler's inputs; every length is in samples.
struct lr_scheduler_options {
  double init_lr = 0.0;  ///< --lr-warmup-init
  double max_lr = 0.0;   ///< --lr
  double min_lr = 0.0;   ///< --min-lr
  double lr_warmup_steps = 0.0;  ///< fractional when it comes from --lr-warmup-fraction
  std::int64_t lr_decay_steps = 0;
  lr_decay_style decay_style = lr_decay_style::linear;
  double start_wd = 0.0;
  double end_wd = 0.0;
  std::int64_t wd_incr_steps = 0;
  weight_decay_incr_style wd_incr_style = weight_decay_incr_style::constant;
  std::optional<std::int64_t> wsd_decay_steps;  ///< required by WSD
  lr_wsd_decay_style wsd_decay_style = lr_wsd_decay_style::exponential;
  bool use_checkpoint_opt_param_scheduler = false;  ///< --use-checkpoint-opt-param-scheduler
  bool override_opt_param_scheduler = false;        ///< --override-opt-param-scheduler
};

/// The Megatron arguments that get_optimizer_param_scheduler reads (argparse dest names).
struct lr_schedule_args {
  std::optional<std::int64_t> train_iters;
  std::optional<std::int64_t> train_samples;
  std::int64_t global_batch_size = 1;
  std::optional<double> lr;
  double min_lr = 0.0;
  double lr_warmup_init = 0.0;
  std::optional<double> lr_warmup_fraction;
  std::int64_t lr_warmup_iters = 0;
  std::int64_t lr_warmup_samples = 0;
  std::optional<std::int64_t> lr_decay_iters;
  std::optional<std::int64_t> lr_decay_samples;
  std::string lr_decay_style = "linear";
  std::optional<std::int64_t> lr_wsd_decay_iters;
  std::optional<std::int64_t> lr_wsd_decay_samples;
  std::string lr_wsd_decay_style = "exponential";
  double weight_decay = 0.01;
  std::optional<double> start_weight_decay;  ///< unset: --weight-decay (validate_args rule)
  std::optional<double> end_weight_decay;    ///< unset: --weight-decay
  std::string weight_decay_incr_style = "constant";
  bool use_checkpoint_opt_param_scheduler = false;
  bool override_opt_param_scheduler = false;
};

/// Iteration-based: decay = (lr_decay_iters or train_iters) * gbs, wd steps = train_iters * gbs,
/// WSD = lr_wsd_decay_iters * gbs, warmup = fraction * decay or lr_warmup_iters * gbs.
/// Sample-based: the same in samples. Throws std::invalid_argument naming the flags when
/// neither --train-iters nor --train-samples is set, --lr is unset, or a style is unknown.
lr_scheduler_options lr_scheduler_options_from_args(const lr_schedule_args& args);

/// Every violation of the scheduler's checks, each naming the flags and a fix; empty if fine.
std::vector<std::string> check_lr_scheduler_options(const lr_scheduler_options& options);

/// The part of the scheduler saved in checkpoints (Megatron's state_dict keys).
struct lr_scheduler_state {
  double max_lr = 0.0;
  double lr_warmup_steps = 0.0;
  std::int64_t num_steps = 0;
  lr_decay_style decay_style = lr_decay_style::linear;
  std::int64_t lr_decay_steps = 0;
  double min_lr = 0.0;
  double start_wd = 0.0;
  double end_wd = 0.0;
  weight_decay_incr_style wd_incr_style = weight_decay_incr_style::constant;
  std::int64_t wd_incr_steps = 0;
};

class lr_scheduler {
 public:
  /// Checks the options (std::invalid_argument listing every violation), then runs step(0),
  /// which sets the groups' lr and weight_decay. groups must outlive the scheduler.
  lr_scheduler(const lr_scheduler_options& options, std::span<param_group> groups = {});

  /// Advances by increment samples (the global batch of the iteration that just finished)
  /// and sets every group's lr = lr(group) * lr_mult and weight_decay = weight_decay() * wd_mult.
  void step(std::int64_t increment);

  std::int64_t num_steps() const { return num_steps_; }
  /// The LR at the current step for a group with these bounds (before lr_mult).
  double lr(double max_lr, double min_lr) const;
  /// The LR for the default bounds (--lr, --min-lr).
  double lr() const { return lr(options_.max_lr, options_.min_lr); }
  /// The weight decay at the current step (before wd_mult).
  double weight_decay() const;
  const lr_scheduler_options& options() const { return options_; }

  lr_scheduler_state state() const;
  /// Megatron's load_state_dict: with override the class values win; without
  /// use-checkpoint they must equal the saved ones (std::invalid_argument otherwise); then
  /// it steps by the saved num_steps.
  void load_state(const lr_scheduler_state& saved);

 private:
  double wsd_coefficient() const;

  lr_scheduler_options options_;
  std::span<param_group> groups_;
  std::int64_t num_steps_ = 0;
};

}  // namespace mactor::model
