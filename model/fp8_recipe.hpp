// Transformer Engine's fp8 recipes as Megatron selects them (--fp8-format, --fp8-recipe and the
// delayed recipe's --fp8-margin, --fp8-amax-history-len, --fp8-amax-compute-algo): which fp8
// type each GEMM operand takes, and how its scale is found. delayed_scaling is the one recipe
// with state across steps (TE's DelayedScaling amax history); the others scale from the tensor
// being quantized (Float8CurrentScaling per tensor, MXFP8BlockScaling per 32 elements,
// Float8BlockScaling per 1x128 activation/gradient tile and 128x128 weight tile).
#pragma once
#include <vector>

#include "kernels/fp8.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

enum class fp8_format { e4m3, hybrid };                         // --fp8-format
enum class fp8_recipe { delayed, tensorwise, mxfp8, blockwise };  // --fp8-recipe
enum class fp8_amax_compute_algo { most_recent, max };           // --fp8-amax-compute-algo

/// The fp8 fields of the model config (Megatron's dest names).
struct fp8_settings {
  bool enabled = false;  // --fp8-format given
  fp8_format fp8 = fp8_format::e4m3;
  fp8_recipe recipe = fp8_recipe::delayed;
  int fp8_margin = 0;
  int fp8_amax_history_len = 1;
  fp8_amax_compute_algo amax_compute_algo = fp8_amax_compute_algo::most_recent;
  /// false (--no-fp8-wgrad): the weight-gradient GEMM in the model's precision. Megatron passes
  /// it to the delayed recipe only (override_linear_precision), so the others ignore it.
  bool fp8_wgrad = true;
  bool first_last_layers_bf16 = false;
  int num_layers_at_start_in_bf16 = 1;
  int num_layers_at_end_in_bf16 = 1;

  /// Whether layer `layer` (global, 0-based) of `num_layers` runs its linears in fp8, as
  /// Megatron's is_first_last_bf16_layer decides.
  bool layer_in_fp8(int layer, int num_layers) const;
};

/// The three operands of a linear's GEMMs.
enum class gemm_operand { input, weight, grad_output };
/// Which dimension of a [rows, cols] operand the GEMM sums over: cols (row-wise blocks) or rows.
enum class gemm_usage { rowwise, columnwise };

/// The fp8 type of an operand: e4m3 everywhere under e4m3; gradients in e5m2 under hybrid.
kernels::fp8_type operand_type(fp8_format format, gemm_operand operand);

/// One tensor's delayed scaling, TE's DelayedScaling: the amax of each quantization is recorded
/// into history[0] (a running max that passes over NaN, as fmaxf); update() then takes the amax (the history's max, or its
/// most recent entry), sets scale = fp8_max * 2^-margin / amax unless that amax is zero or not
/// finite (the previous scale stays), and rolls the history left, zeroing slot 0.
class delayed_scaling {
 public:
  delayed_scaling(int history_len, fp8_amax_compute_algo algo, int margin, float fp8_max);
  float scale() const { return scale_; }
  float scale_inv() const { return scale_inv_; }
  const std::vector<float>& history() const { return history_; }
  void record(float amax);
  void update();
  /// history[0] = amax (the amax group's maximum of it), then update().
  void update_with(float amax);
  /// The state a checkpoint keeps (TE's fp8_meta amax_history and scale): the history, then
  /// the scale; restore() takes the same layout back (throws std::invalid_argument on another
  /// history length).
  void append_state(std::vector<float>& out) const;
  const float* restore(const float* state, std::size_t history_len);

 private:
  std::vector<float> history_;
  fp8_amax_compute_algo algo_;
  float scaled_max_;
  float scale_ = 1.0f, scale_inv_ = 1.0f;
};

/// out = x [rows, cols] rounded through fp8 as `recipe` quantizes `operand` for `usage`, with
/// the given tensor scale for the per-tensor recipes (delayed: the state's; tensorwise: from
/// x's own amax, ignoring `scale`). Blocks: MXFP8 32 elements along the summed dimension;
/// blockwise 128 along it, or 128x128 tiles for the weight.
void round_through_recipe(tensor::tensor_view out, tensor::const_tensor_view x, int rows, int cols,
                          fp8_recipe recipe, kernels::fp8_type type, gemm_operand operand,
                          gemm_usage usage, float scale, float scale_inv);

}  // namespace mactor::model
