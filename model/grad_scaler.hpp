// Megatron's loss scaling for fp16 (megatron/core/optimizer/grad_scaler.py): the loss is
// multiplied by a scale before the backward so small fp16 gradients do not flush to zero; the
// optimizer divides the main gradients by it, and a step whose gradients hold an inf or a NaN
// is skipped. The dynamic scaler backs off (x0.5, not below the minimum) after `hysteresis`
// such steps and grows (x2) after `growth_interval` clean ones in a row; the constant one never
// changes. The scale is an fp32 value, as Megatron keeps it.
#pragma once

#include <cstdint>
#include <span>

#include "model/optimizer_param.hpp"

namespace mactor::model {

struct grad_scaler_options {
  bool dynamic = true;
  float initial_scale = 4294967296.0f;  ///< --initial-loss-scale, or --loss-scale when constant
  float min_scale = 1.0f;               ///< --min-loss-scale
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  std::int64_t growth_interval = 1000;  ///< --loss-scale-window
  std::int64_t hysteresis = 2;          ///< --hysteresis
};

/// What a checkpoint keeps of a dynamic scaler (Megatron's state_dict keys).
struct grad_scaler_state {
  float scale = 1.0f;
  std::int64_t growth_tracker = 0;
  std::int64_t hysteresis_tracker = 0;
};

class grad_scaler {
 public:
  /// Throws std::invalid_argument for options Megatron's asserts refuse.
  explicit grad_scaler(const grad_scaler_options& options);
  float scale() const { return state_.scale; }
  /// 1 / scale, computed in double and rounded to fp32 (Megatron's inv_scale).
  float inv_scale() const { return static_cast<float>(1.0 / static_cast<double>(state_.scale)); }
  /// After a step's gradients were checked: found_inf on any rank of the step.
  void update(bool found_inf);
  bool dynamic() const { return options_.dynamic; }
  grad_scaler_state state() const { return state_; }
  void load(const grad_scaler_state& s) { state_ = s; }

 private:
  grad_scaler_options options_;
  grad_scaler_state state_;
};

/// Multiplies every main gradient by inv_scale and returns whether any was not finite (torch's
/// _amp_foreach_non_finite_check_and_unscale_, which Megatron's optimizer calls before clipping).
bool unscale_and_check(std::span<const optim_param> params, float inv_scale);
/// Multiplies every main gradient by factor.
void scale_grads(std::span<const optim_param> params, float factor);

}  // namespace mactor::model
