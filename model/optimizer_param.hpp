// The optimizer's view of a model: flat fp32 parameters with their gradients, and the
// parameter groups Megatron-Core builds from them (weight-decay and LR multipliers).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::model {

/// One trainable tensor as the optimizer sees it. The model owns both buffers.
struct optim_param {
  std::string name;
  float* value = nullptr;  ///< numel floats, updated in place by the optimizer
  float* grad = nullptr;   ///< numel floats (main grad), read and clipped in place
  std::size_t numel = 0;
  /// Where both buffers are: the optimizer's state, its update and its statistics stay there.
  tensor::device where = tensor::cpu;
  tensor::tensor_view value_view() const { return {value, {std::int64_t(numel)}, tensor::dtype::float32, where}; }
  tensor::tensor_view grad_view() const { return {grad, {std::int64_t(numel)}, tensor::dtype::float32, where}; }
  /// Biases and norm weights (Megatron: name ends in ".bias" or the tensor is 1-D).
  bool no_weight_decay = false;
  double lr_mult = 1.0;  ///< Megatron's scale_lr_cond multiplier
  double wd_mult = 1.0;  ///< multiplies the scheduled weight decay (0 when no_weight_decay)
  /// Embedding / output layer when --decoupled-lr is set: the group uses decoupled max/min LR.
  bool decoupled_lr = false;
  /// False for shared params and tensor-parallel duplicates: they are left out of the grad
  /// norm, the zero count and the params norm (another rank or another param counts them).
  bool in_grad_stats = true;
};

/// The LR bounds and initial weight decay given to every group (Megatron's
/// _update_min_and_max_lr_in_param_groups inputs).
struct param_group_defaults {
  double lr = 0.0;                          ///< --lr
  double min_lr = 0.0;                      ///< --min-lr
  std::optional<double> decoupled_lr;       ///< --decoupled-lr
  std::optional<double> decoupled_min_lr;   ///< --decoupled-min-lr (defaults to --min-lr)
  double weight_decay = 0.0;                ///< --weight-decay (until the scheduler sets it)
};

/// Params that share (wd_mult, lr_mult, decoupled_lr): one torch param group.
/// lr and weight_decay are the values the next optimizer step uses; the LR scheduler sets them.
struct param_group {
  double wd_mult = 1.0;  ///< 0 when the group's params have no_weight_decay
  double lr_mult = 1.0;
  bool decoupled_lr = false;
  double max_lr = 0.0;  ///< the scheduler's max_lr for this group
  double min_lr = 0.0;  ///< the scheduler's min_lr for this group
  double lr = 0.0;
  double weight_decay = 0.0;
  std::vector<std::size_t> params;  ///< indices into the optimizer's parameter list
};

/// Groups params as Megatron-Core's _get_param_groups does: one group per distinct
/// (wd_mult, lr_mult, decoupled_lr) key, in the order keys first appear. A no_weight_decay
/// param gets wd_mult 0. Throws std::invalid_argument when a param is decoupled but
/// defaults.decoupled_lr is unset, or a param has null buffers.
std::vector<param_group> make_param_groups(std::span<const optim_param> params,
                                           const param_group_defaults& defaults);

/// The learning rate Megatron prints: the lr of the last non-decoupled group that holds params.
std::optional<double> logged_learning_rate(std::span<const param_group> groups);
/// The decoupled learning rate Megatron prints: the lr of the last decoupled group with params.
std::optional<double> logged_decoupled_learning_rate(std::span<const param_group> groups);

/// Sets every gradient to zero.
void zero_grads(std::span<const optim_param> params);

}  // namespace mactor::model
