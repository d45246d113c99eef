// Megatron-Core's OptimizerParamScheduler (core_v0.15.0) in samples, and the translation of
// Megatron's flags into its inputs (training.py's get_optimizer_param_scheduler).
#include "model/lr_scheduler.hpp"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <stdexcept>

namespace mactor::model {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string join_errors(const std::vector<std::string>& errors) {
  std::string text;
  for (const std::string& e : errors) text += (text.empty() ? "" : "\n") + e;
  return text;
}

template <class Style>
Style parse_or_throw(std::optional<Style> style, std::string_view flag, std::string_view text,
                     std::string_view choices) {
  if (style) return *style;
  throw std::invalid_argument("error: " + std::string(flag) + "=" + std::string(text) +
                              " is not a known style; choose one of " + std::string(choices));
}

}  // namespace

std::optional<lr_decay_style> parse_lr_decay_style(std::string_view text) {
  if (text == "constant") return lr_decay_style::constant;
  if (text == "linear") return lr_decay_style::linear;
  if (text == "cosine") return lr_decay_style::cosine;
  if (text == "inverse-square-root") return lr_decay_style::inverse_square_root;
  if (text == "WSD") return lr_decay_style::wsd;
  return std::nullopt;
}

std::optional<lr_wsd_decay_style> parse_lr_wsd_decay_style(std::string_view text) {
  if (text == "exponential") return lr_wsd_decay_style::exponential;
  if (text == "linear") return lr_wsd_decay_style::linear;
  if (text == "cosine") return lr_wsd_decay_style::cosine;
  if (text == "minus_sqrt") return lr_wsd_decay_style::minus_sqrt;
  return std::nullopt;
}

std::optional<weight_decay_incr_style> parse_weight_decay_incr_style(std::string_view text) {
  if (text == "constant") return weight_decay_incr_style::constant;
  if (text == "linear") return weight_decay_incr_style::linear;
  if (text == "cosine") return weight_decay_incr_style::cosine;
  return std::nullopt;
}

std::string_view to_string(lr_decay_style style) {
  switch (style) {
    case lr_decay_style::constant: return "constant";
    case lr_decay_style::linear: return "linear";
    case lr_decay_style::cosine: return "cosine";
    case lr_decay_style::inverse_square_root: return "inverse-square-root";
    case lr_decay_style::wsd: return "WSD";
  }
  return "?";
}

std::string_view to_string(lr_wsd_decay_style style) {
  switch (style) {
    case lr_wsd_decay_style::exponential: return "exponential";
    case lr_wsd_decay_style::linear: return "linear";
    case lr_wsd_decay_style::cosine: return "cosine";
    case lr_wsd_decay_style::minus_sqrt: return "minus_sqrt";
  }
  return "?";
}

std::string_view to_string(weight_decay_incr_style style) {
  switch (style) {
    case weight_decay_incr_style::constant: return "constant";
    case weight_decay_incr_style::linear: return "linear";
    case weight_decay_incr_style::cosine: return "cosine";
  }
  return "?";
}

lr_scheduler_options lr_scheduler_options_from_args(const lr_schedule_args& a) {
  lr_scheduler_options o;
  if (!a.lr)
    throw std::invalid_argument("error: --lr is not set; give the peak learning rate, e.g. --lr 3e-4");
  // Sample-based whenever --train-samples is given (Megatron's validation keeps --train-iters unset
  // then; the iteration count config derives from the samples must not make it iteration-based).
  const bool by_samples = a.train_samples && *a.train_samples != 0;
  const bool by_iters = !by_samples && a.train_iters && *a.train_iters != 0;
  if (by_iters) {
    const std::int64_t gbs = a.global_batch_size;
    o.lr_decay_steps = a.lr_decay_iters.value_or(*a.train_iters) * gbs;
    o.wd_incr_steps = *a.train_iters * gbs;
    if (a.lr_wsd_decay_iters) o.wsd_decay_steps = *a.lr_wsd_decay_iters * gbs;
    o.lr_warmup_steps = a.lr_warmup_fraction
                            ? *a.lr_warmup_fraction * static_cast<double>(o.lr_decay_steps)
                            : static_cast<double>(a.lr_warmup_iters * gbs);
  } else if (by_samples) {
    o.lr_decay_steps = a.lr_decay_samples.value_or(*a.train_samples);
    o.wd_incr_steps = *a.train_samples;
    o.wsd_decay_steps = a.lr_wsd_decay_samples;
    o.lr_warmup_steps = a.lr_warmup_fraction
                            ? *a.lr_warmup_fraction * static_cast<double>(o.lr_decay_steps)
                            : static_cast<double>(a.lr_warmup_samples);
  } else {
    throw std::invalid_argument(
        "error: neither --train-iters nor --train-samples is set; give the training length "
        "with one of them");
  }
  o.init_lr = a.lr_warmup_init;
  o.max_lr = *a.lr;
  o.min_lr = a.min_lr;
  o.decay_style = parse_or_throw(parse_lr_decay_style(a.lr_decay_style), "--lr-decay-style",
                                 a.lr_decay_style,
                                 "constant, linear, cosine, inverse-square-root, WSD");
  o.wsd_decay_style = parse_or_throw(parse_lr_wsd_decay_style(a.lr_wsd_decay_style),
                                     "--lr-wsd-decay-style", a.lr_wsd_decay_style,
                                     "exponential, linear, cosine, minus_sqrt");
  o.wd_incr_style = parse_or_throw(parse_weight_decay_incr_style(a.weight_decay_incr_style),
                                   "--weight-decay-incr-style", a.weight_decay_incr_style,
                                   "constant, linear, cosine");
  if (o.wd_incr_style != weight_decay_incr_style::constant &&
      (!a.start_weight_decay || !a.end_weight_decay))
    throw std::invalid_argument("error: --weight-decay-incr-style " + a.weight_decay_incr_style +
                                " needs both --start-weight-decay and --end-weight-decay");
  o.start_wd = a.start_weight_decay.value_or(a.weight_decay);
  o.end_wd = a.end_weight_decay.value_or(a.weight_decay);
  o.use_checkpoint_opt_param_scheduler = a.use_checkpoint_opt_param_scheduler;
  o.override_opt_param_scheduler = a.override_opt_param_scheduler;
  return o;
}

std::vector<std::string> check_lr_scheduler_options(const lr_scheduler_options& o) {
  std::vector<std::string> e;
  if (!(o.min_lr >= 0.0))
    e.push_back("error: --min-lr=" + num(o.min_lr) + " is negative; it must be >= 0");
  if (!(o.max_lr >= o.min_lr))
    e.push_back("error: --lr=" + num(o.max_lr) + " is below --min-lr=" + num(o.min_lr) +
                "; raise --lr or lower --min-lr");
  if (!(o.init_lr <= o.max_lr))
    e.push_back("error: --lr-warmup-init=" + num(o.init_lr) + " is above --lr=" +
                num(o.max_lr) + "; warmup must start at or below the peak LR");
  if (!(o.lr_decay_steps > 0))
    e.push_back("error: the LR decay spans " + std::to_string(o.lr_decay_steps) +
                " samples; it must be > 0: set --lr-decay-iters or --lr-decay-samples (they "
                "default to --train-iters or --train-samples) to a positive value");
  else if (!(o.lr_warmup_steps < static_cast<double>(o.lr_decay_steps)))
    e.push_back("error: the LR warmup (--lr-warmup-iters, --lr-warmup-samples or "
                "--lr-warmup-fraction) spans " + num(o.lr_warmup_steps) +
                " samples, not fewer than the " + std::to_string(o.lr_decay_steps) +
                " samples of LR decay (--lr-decay-iters or --lr-decay-samples, defaulting to "
                "--train-iters or --train-samples); shorten the warmup or lengthen the decay");
  if (o.decay_style == lr_decay_style::wsd && !o.wsd_decay_steps)
    e.push_back("error: --lr-decay-style WSD needs the length of its decay phase: set "
                "--lr-wsd-decay-iters (or --lr-wsd-decay-samples when training by samples)");
  if (!(o.start_wd >= 0.0))
    e.push_back("error: --start-weight-decay=" + num(o.start_wd) +
                " is negative (with --weight-decay-incr-style constant this is --weight-decay); "
                "it must be >= 0");
  if (!(o.end_wd >= o.start_wd))
    e.push_back("error: --end-weight-decay=" + num(o.end_wd) + " is below --start-weight-decay=" +
                num(o.start_wd) + "; weight decay can only grow over training");
  if (o.wd_incr_style == weight_decay_incr_style::constant && o.start_wd != o.end_wd)
    e.push_back("error: --weight-decay-incr-style constant needs --start-weight-decay (" +
                num(o.start_wd) + ") equal to --end-weight-decay (" + num(o.end_wd) +
                "); leave both unset to use --weight-decay, or pick linear or cosine");
  if (o.wd_incr_style != weight_decay_incr_style::constant && !(o.wd_incr_steps > 0))
    e.push_back("error: --weight-decay-incr-style " + std::string(to_string(o.wd_incr_style)) +
                " needs a positive training length (--train-iters or --train-samples); got " +
                std::to_string(o.wd_incr_steps) + " samples");
  if (o.override_opt_param_scheduler && o.use_checkpoint_opt_param_scheduler)
    e.push_back("error: --override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler "
                "are both set; pick one (class values or checkpoint values)");
  return e;
}

lr_scheduler::lr_scheduler(const lr_scheduler_options& options, std::span<param_group> groups)
    : options_(options), groups_(groups) {
  if (auto errors = check_lr_scheduler_options(options_); !errors.empty())
    throw std::invalid_argument(join_errors(errors));
  step(0);
}

void lr_scheduler::step(std::int64_t increment) {
  num_steps_ += increment;
  const double wd = weight_decay();
  for (param_group& g : groups_) {
    g.lr = lr(g.max_lr, g.min_lr) * g.lr_mult;
    g.weight_decay = wd * g.wd_mult;
  }
}

double lr_scheduler::weight_decay() const {
  const lr_scheduler_options& o = options_;
  if (num_steps_ > o.wd_incr_steps) return o.end_wd;
  if (o.wd_incr_style == weight_decay_incr_style::constant) return o.end_wd;
  const double ratio = static_cast<double>(num_steps_) / static_cast<double>(o.wd_incr_steps);
  const double coeff = o.wd_incr_style == weight_decay_incr_style::linear
                           ? ratio
                           : 0.5 * (std::cos(std::numbers::pi * (1 - ratio)) + 1.0);
  return o.start_wd + coeff * (o.end_wd - o.start_wd);
}

double lr_scheduler::lr(double max_lr, double min_lr) const {
  const lr_scheduler_options& o = options_;
  const double steps = static_cast<double>(num_steps_);
  if (o.lr_warmup_steps > 0 && steps <= o.lr_warmup_steps)
    return o.init_lr + (max_lr - o.init_lr) * steps / o.lr_warmup_steps;
  if (o.decay_style == lr_decay_style::constant) return max_lr;
  if (num_steps_ > o.lr_decay_steps) return min_lr;
  if (o.decay_style == lr_decay_style::inverse_square_root) {
    const double warmup = std::max(o.lr_warmup_steps, 1.0);
    const double n = std::max(steps, 1.0);
    return std::max(min_lr, max_lr * std::pow(warmup, 0.5) / std::pow(n, 0.5));
  }
  const double ratio = (steps - o.lr_warmup_steps) /
                       (static_cast<double>(o.lr_decay_steps) - o.lr_warmup_steps);
  double coeff = 1.0;
  switch (o.decay_style) {
    case lr_decay_style::linear: coeff = 1.0 - ratio; break;
    case lr_decay_style::cosine: coeff = 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0); break;
    case lr_decay_style::wsd: coeff = wsd_coefficient(); break;
    default: break;
  }
  return min_lr + coeff * (max_lr - min_lr);
}

double lr_scheduler::wsd_coefficient() const {
  const lr_scheduler_options& o = options_;
  const std::int64_t wsd_steps_total = *o.wsd_decay_steps;
  const std::int64_t anneal_start = o.lr_decay_steps - wsd_steps_total;
  if (num_steps_ <= anneal_start) return 1.0;
  const double t = static_cast<double>(num_steps_ - anneal_start) /
                   static_cast<double>(wsd_steps_total);
  switch (o.wsd_decay_style) {
    case lr_wsd_decay_style::linear: return 1.0 - t;
    case lr_wsd_decay_style::cosine: return 0.5 * (std::cos(std::numbers::pi * t) + 1.0);
    case lr_wsd_decay_style::exponential: return 2.0 * std::pow(0.5, t) - 1.0;
    case lr_wsd_decay_style::minus_sqrt: return 1.0 - std::sqrt(t);
  }
  return 1.0;
}

lr_scheduler_state lr_scheduler::state() const {
  const lr_scheduler_options& o = options_;
  return {o.max_lr,   o.lr_warmup_steps, num_steps_, o.decay_style,   o.lr_decay_steps,
          o.min_lr,   o.start_wd,        o.end_wd,   o.wd_incr_style, o.wd_incr_steps};
}

namespace {

// Megatron's _check_and_set: the class value under override, else the saved value, which must
// equal the class value unless the checkpoint's values are asked for.
template <class T>
T check_and_set(const lr_scheduler_options& o, T class_value, T saved, const char* what,
                std::vector<std::string>& errors) {
  if (o.override_opt_param_scheduler) return class_value;
  if (!o.use_checkpoint_opt_param_scheduler && !(class_value == saved))
    errors.push_back(std::string("error: the checkpoint's LR scheduler has a different ") + what +
                     " than the flags give; pass --use-checkpoint-opt-param-scheduler to take "
                     "the checkpoint's, or --override-opt-param-scheduler to take the flags'");
  return saved;
}

}  // namespace

void lr_scheduler::load_state(const lr_scheduler_state& s) {
  lr_scheduler_options o = options_;
  std::vector<std::string> errors;
  o.max_lr = check_and_set(options_, o.max_lr, s.max_lr, "learning rate", errors);
  o.min_lr = check_and_set(options_, o.min_lr, s.min_lr, "minimum learning rate", errors);
  o.lr_warmup_steps =
      check_and_set(options_, o.lr_warmup_steps, s.lr_warmup_steps, "warmup length", errors);
  o.lr_decay_steps =
      check_and_set(options_, o.lr_decay_steps, s.lr_decay_steps, "decay length", errors);
  o.decay_style =
      check_and_set(options_, o.decay_style, s.decay_style, "learning rate decay style", errors);
  o.start_wd = check_and_set(options_, o.start_wd, s.start_wd, "start weight decay", errors);
  o.end_wd = check_and_set(options_, o.end_wd, s.end_wd, "end weight decay", errors);
  o.wd_incr_steps = check_and_set(options_, o.wd_incr_steps, s.wd_incr_steps,
                                  "weight decay increment length", errors);
  o.wd_incr_style = check_and_set(options_, o.wd_incr_style, s.wd_incr_style,
                                  "weight decay increment style", errors);
  if (!errors.empty()) throw std::invalid_argument(join_errors(errors));
  // Megatron steps before it takes the weight-decay values, so the groups keep the old weight
  // decay until the next step.
  lr_scheduler_options lr_part = o;
  lr_part.start_wd = options_.start_wd;
  lr_part.end_wd = options_.end_wd;
  lr_part.wd_incr_steps = options_.wd_incr_steps;
  lr_part.wd_incr_style = options_.wd_incr_style;
  options_ = lr_part;
  step(s.num_steps);
  options_ = o;
}

}  // namespace mactor::model
