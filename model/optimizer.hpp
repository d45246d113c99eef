// The optimizer interface (--optimizer adam|sgd), its factory, and one training-step update in
// the order Megatron-Core's FP32Optimizer.step runs it: clip, count zeros, update.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "model/grad_clip.hpp"
#include "model/optimizer_param.hpp"
#include "model/optimizer_state.hpp"

namespace mactor::model {

/// Updates params in place from their grads, with each group's current lr and weight_decay.
class optimizer {
 public:
  optimizer(std::vector<optim_param> params, std::vector<param_group> groups);
  virtual ~optimizer() = default;
  optimizer(const optimizer&) = delete;
  optimizer& operator=(const optimizer&) = delete;

  /// One update of every param (torch's optimizer.step()).
  virtual void step() = 0;
  /// Bytes of optimizer state held now (Adam's moments, SGD's momentum), for memory reports.
  virtual std::size_t state_bytes() const = 0;

  std::span<const optim_param> params() const { return params_; }
  /// The groups; the LR scheduler writes their lr and weight_decay between steps.
  std::span<param_group> param_groups() { return groups_; }
  std::span<const param_group> param_groups() const { return groups_; }

 protected:
  std::vector<optim_param> params_;
  std::vector<param_group> groups_;
};

enum class optimizer_kind { adam, sgd };

/// Parses Megatron's --optimizer choice ("adam" or "sgd").
std::optional<optimizer_kind> parse_optimizer_kind(std::string_view text);

/// The flags that pick and configure the optimizer (dest names of Megatron's arguments).
struct optimizer_options {
  optimizer_kind optimizer = optimizer_kind::adam;  ///< --optimizer
  double lr = 0.0;                                  ///< --lr
  double min_lr = 0.0;                              ///< --min-lr
  std::optional<double> decoupled_lr;               ///< --decoupled-lr
  std::optional<double> decoupled_min_lr;           ///< --decoupled-min-lr
  double weight_decay = 0.01;                       ///< --weight-decay
  double adam_beta1 = 0.9;                          ///< --adam-beta1
  double adam_beta2 = 0.999;                        ///< --adam-beta2
  double adam_eps = 1e-8;                           ///< --adam-eps
  double sgd_momentum = 0.9;                        ///< --sgd-momentum
  /// Megatron-Core's OptimizerConfig.decoupled_weight_decay (no CLI flag; true gives AdamW).
  bool decoupled_weight_decay = true;
  /// --exp-avg-dtype / --exp-avg-sq-dtype (with --use-precision-aware-optimizer; Adam only).
  state_dtype exp_avg_dtype = state_dtype::fp32;
  state_dtype exp_avg_sq_dtype = state_dtype::fp32;
};

/// Builds the optimizer over params, grouped as make_param_groups does.
std::unique_ptr<optimizer> make_optimizer(std::vector<optim_param> params,
                                          const optimizer_options& options);

/// What one optimizer step reports to the training log.
struct optimizer_step_result {
  bool update_successful = true;
  std::optional<double> grad_norm;         ///< before clipping; set when clip_grad > 0
  std::optional<double> num_zeros_in_grad; ///< set when counting zeros
};

/// The parts of a step, in order (Megatron times each one).
enum class step_part { clip_main_grad, count_zeros, inner_step };
/// Runs one part of a step, e.g. inside a timer: `run(part, work)` must call `work` once.
using step_part_runner = std::function<void(step_part part, const std::function<void()>& work)>;

/// Megatron's fp32 step: with clip_grad > 0 the grad norm is measured and the grads clipped;
/// with count_zeros the zeros are counted (after clipping); then the params are updated. Each
/// part goes through `run` when given, also a part with nothing to do.
optimizer_step_result clip_and_step(optimizer& opt, double clip_grad, bool count_zeros,
                                    const sum_reducer& reduce = {}, const step_part_runner& run = {});

}  // namespace mactor::model
