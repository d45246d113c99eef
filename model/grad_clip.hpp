// Gradient statistics and clipping as Megatron-Core's clip_grads.py: the global L2 norm of the
// grads (--clip-grad), the zero count (--log-num-zeros-in-grad) and the params norm
// (--log-params-norm). Each is a local sum plus a caller-supplied reduction over a rank group.
#pragma once

#include <functional>
#include <span>

#include "model/optimizer_param.hpp"

namespace mactor::model {

/// Sums the given values element-wise over a group of ranks, in place (an all-reduce SUM).
/// An empty function means a single rank: the local values are the totals.
using sum_reducer = std::function<void(std::span<double> values)>;

/// Sum over params with in_grad_stats of grad squared, accumulated in double.
double local_grad_sum_of_squares(std::span<const optim_param> params);
/// Number of exact zeros (+0 or -0) in the grads of params with in_grad_stats.
double local_grad_zeros(std::span<const optim_param> params);
/// Sum over params with in_grad_stats of value squared.
double local_param_sum_of_squares(std::span<const optim_param> params);

/// sqrt of the reduced sum of squares of the grads: Megatron's get_grad_norm_fp32 (L2).
double grad_norm(std::span<const optim_param> params, const sum_reducer& reduce = {});

/// Megatron's clip_coeff = max_norm / (total_norm + 1e-6); the grads of every param (stats
/// flag or not) are multiplied by it when it is below 1. NaN total norms never clip.
/// Returns whether the grads were scaled.
bool clip_grads_by_total_norm(std::span<const optim_param> params, double max_norm,
                              double total_norm);

/// grad_norm then clip_grads_by_total_norm; returns the norm measured before clipping (the
/// "grad norm" of the training log).
double clip_grad_norm(std::span<const optim_param> params, double max_norm,
                      const sum_reducer& reduce = {});

/// The reduced zero count, as Megatron's count_zeros_fp32.
double count_zeros_in_grads(std::span<const optim_param> params, const sum_reducer& reduce = {});

/// The L2 norm of the parameters, as Megatron's calc_params_l2_norm.
double params_norm(std::span<const optim_param> params, const sum_reducer& reduce = {});

}  // namespace mactor::model
