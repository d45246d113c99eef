// Constant and dynamic loss scaling, step for step as Megatron-Core's grad_scaler.py.
#include "model/grad_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/reductions.hpp"
#include "kernels/tensor_ops.hpp"

namespace mactor::model {

grad_scaler::grad_scaler(const grad_scaler_options& o) : options_(o) {
  if (!(o.initial_scale > 0.0f)) throw std::invalid_argument("the loss scale must be positive");
  if (o.dynamic) {
    if (!(o.min_scale > 0.0f) || o.min_scale > o.initial_scale)
      throw std::invalid_argument("--min-loss-scale must be positive and at most --initial-loss-scale");
    if (o.growth_interval <= 0) throw std::invalid_argument("--loss-scale-window must be positive");
    if (o.hysteresis <= 0) throw std::invalid_argument("--hysteresis must be positive");
  }
  state_.scale = o.initial_scale;
  state_.hysteresis_tracker = o.hysteresis;
}

void grad_scaler::update(bool found_inf) {
  if (!options_.dynamic) return;
  if (found_inf) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker -= 1;
    if (state_.hysteresis_tracker <= 0)
      state_.scale = std::max(state_.scale * options_.backoff_factor, options_.min_scale);
    return;
  }
  state_.growth_tracker += 1;
  if (state_.growth_tracker == options_.growth_interval) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = options_.hysteresis;
    state_.scale = state_.scale * options_.growth_factor;
  }
}

bool unscale_and_check(std::span<const optim_param> params, float inv_scale) {
  bool found = false;
  for (const auto& p : params) {
    if (p.where != tensor::cpu) {
      // On a device, through the entry points: one inf or NaN makes the sum of squares (in
      // double, where squares of finite floats cannot overflow) inf or NaN.
      found |= !std::isfinite(kernels::sum_of_squares(p.grad_view()));
      kernels::scale(p.grad_view(), inv_scale);
      continue;
    }
    for (std::size_t i = 0; i < p.numel; ++i) {
      found |= !std::isfinite(p.grad[i]);
      p.grad[i] *= inv_scale;
    }
  }
  return found;
}

void scale_grads(std::span<const optim_param> params, float factor) {
  for (const auto& p : params) kernels::scale(p.grad_view(), factor);
}

}  // namespace mactor::model
