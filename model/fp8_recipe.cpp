// Transformer Engine's fp8 recipes: operand types, the delayed recipe's amax history, and the
// per-tensor and per-block rounding of each recipe.
#include "model/fp8_recipe.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace mactor::model {

bool fp8_settings::layer_in_fp8(int layer, int num_layers) const {
  if (!enabled) return false;
  if (!first_last_layers_bf16) return true;
  return layer >= num_layers_at_start_in_bf16 && layer < num_layers - num_layers_at_end_in_bf16;
}

kernels::fp8_type operand_type(fp8_format format, gemm_operand operand) {
  return format == fp8_format::hybrid && operand == gemm_operand::grad_output ? kernels::fp8_type::e5m2
                                                                              : kernels::fp8_type::e4m3;
}

delayed_scaling::delayed_scaling(int history_len, fp8_amax_compute_algo algo, int margin,
                                 float fp8_max)
    : history_(std::size_t(std::max(1, history_len)), 0.0f), algo_(algo),
      scaled_max_(fp8_max * std::exp2(-float(margin))) {
  if (history_len < 1) throw std::invalid_argument("delayed_scaling needs an amax history of at least 1");
}

void delayed_scaling::record(float amax) {
  history_[0] = std::fmax(history_[0], amax);  // fmaxf, as TE's amax kernels: a NaN is passed over
}

void delayed_scaling::update() {
  float amax = history_[0];
  if (algo_ == fp8_amax_compute_algo::max)
    for (float a : history_) amax = std::fmax(amax, a);
  if (std::isfinite(amax) && amax > 0.0f) scale_ = scaled_max_ / amax;
  scale_inv_ = 1.0f / scale_;
  std::rotate(history_.begin(), history_.begin() + 1, history_.end());
  history_[0] = 0.0f;
}

void delayed_scaling::update_with(float amax) {
  history_[0] = amax;
  update();
}

void delayed_scaling::append_state(std::vector<float>& out) const {
  out.insert(out.end(), history_.begin(), history_.end());
  out.push_back(scale_);
}

const float* delayed_scaling::restore(const float* state, std::size_t history_len) {
  if (history_len != history_.size())
    throw std::invalid_argument("an amax history of " + std::to_string(history_len) + " entries, not " +
                                std::to_string(history_.size()));
  std::copy(state, state + history_len, history_.begin());
  scale_ = state[history_len];
  scale_inv_ = 1.0f / scale_;  // as update() sets it
  return state + history_len + 1;
}

void round_through_recipe(tensor::tensor_view out, tensor::const_tensor_view x, int rows, int cols,
                          fp8_recipe recipe, kernels::fp8_type type, gemm_operand operand,
                          gemm_usage usage, float scale, float scale_inv) {
  const bool rowwise = usage == gemm_usage::rowwise;
  switch (recipe) {
    case fp8_recipe::delayed:
      kernels::round_through_fp8(out, x, scale, scale_inv, type);
      return;
    case fp8_recipe::tensorwise: {
      const auto [s, inv] = kernels::current_scale(kernels::amax(x), kernels::fp8_max(type), false);
      kernels::round_through_fp8(out, x, s, inv, type);
      return;
    }
    case fp8_recipe::mxfp8:
      kernels::round_through_fp8_blocks(out, x, rows, cols, rowwise ? 1 : 32, rowwise ? 32 : 1,
                                        kernels::block_scale_rule::e8m0, type);
      return;
    case fp8_recipe::blockwise: {
      const int along = 128, across = operand == gemm_operand::weight ? 128 : 1;
      kernels::round_through_fp8_blocks(out, x, rows, cols, rowwise ? across : along,
                                        rowwise ? along : across,
                                        kernels::block_scale_rule::power_of_two, type);
      return;
    }
  }
}

}  // namespace mactor::model
