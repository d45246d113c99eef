// The three GEMMs of a linear layer (y = x W^T, dx = dy W, dW += dy^T x) as Transformer
// Engine's Linear runs them under fp8_autocast, emulated on the CPU: each operand is rounded
// through fp8 as the recipe quantizes it for that GEMM (x and W in the forward type, dy in the
// backward one), and the GEMM multiplies the rounded values in fp32 into the usual output.
// Megatron keeps one fp8_meta per TE module; this is it, for one linear.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "model/fp8_recipe.hpp"
#include "model/gpt_model_config.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

/// The config layer `layer` (global, 0-based) builds its linears from: fp8 off for a layer that
/// --first-last-layers-bf16 keeps in the model's precision.
gpt_model_config with_layer_fp8(const gpt_model_config& c, int layer);

class fp8_linear {
 public:
  explicit fp8_linear(const fp8_settings& settings);

  /// y[rows, out] = q(x)[rows, in] q(W)[out, in]^T. The delayed recipe quantizes with the
  /// scales its histories gave and records x's and W's amax; it updates the scales at once, or,
  /// after defer_updates(), leaves that to its region's amax step (TE updates at the end of each
  /// fp8_autocast forward, model/fp8_amax_reduction.hpp).
  /// A forward of an input it has already seen and not yet back-propagated (a recomputed
  /// forward) reuses that forward's scales and records nothing, as TE's recompute does.
  void forward(tensor::const_tensor_view x, tensor::const_tensor_view w, tensor::tensor_view y,
               int rows, int in, int out);
  /// Runs, or queues for a zero-bubble W pass, dW += dy^T x on the operands given (copying them
  /// when it queues: they are this linear's scratch).
  using weight_grad_gemm = std::function<void(tensor::const_tensor_view dy, tensor::const_tensor_view x)>;
  /// dW += q(dy)^T q(x) (in the model's precision under --no-fp8-wgrad with the delayed recipe),
  /// through `dw`, and dx = q(dy) q(W), x and W quantized as in x's forward; then the delayed
  /// recipe's gradient history is updated (after defer_updates(): by the region's amax step, as
  /// TE does at the end of the region's backward).
  void backward(tensor::const_tensor_view dy, tensor::const_tensor_view x,
                tensor::const_tensor_view w, const weight_grad_gemm& dw, tensor::tensor_view dx,
                int rows, int in, int out);
  /// The same with dW += at once into `dw`.
  void backward(tensor::const_tensor_view dy, tensor::const_tensor_view x, tensor::const_tensor_view w,
                tensor::tensor_view dw, tensor::tensor_view dx, int rows, int in, int out);

  /// --fp8-param-gather (Transformer Engine's fp8 primary weights): the GEMMs take W as the
  /// e4m3 values `bytes` (the linear's [out, in] weight) times *scale_inv, held by the caller
  /// and re-quantized by it after each optimizer step, instead of rounding the weight they are
  /// given; the forward then records no weight amax (the cast did) but still updates the delayed
  /// recipe's weight history. Per-tensor recipes only (delayed, tensorwise).
  void use_primary_weight(const std::uint8_t* bytes, const float* scale_inv);
  bool has_primary_weight() const { return primary_bytes_ != nullptr; }
  const fp8_settings& settings() const { return settings_; }
  /// The weight's delayed scaling, for the cast of the main parameters to fp8 (its scale, and
  /// the amax it records).
  delayed_scaling& weight_scaling_state() { return weight_; }

  /// The passes of the delayed recipe's amax step: the forward's operands (input, weight) or the
  /// backward's (grad_output).
  enum class pass { forward, backward };
  /// Leaves the delayed recipe's scale updates to amax_of/update_from (the linear's region
  /// reduces its amaxes over the amax group first); without it each pass updates at once.
  void defer_updates() { deferred_ = true; }
  /// Appends the newest amax of each of the pass's operands (forward: input, weight; backward:
  /// grad_output) that a pass recorded since the last update, or -1 for each when none did (a
  /// recomputed forward, a layer that did not run), so every rank appends as many.
  void amax_of(pass p, std::vector<float>& out) const;
  /// Takes as many entries as amax_of appended: a non-negative one (some rank of the group
  /// recorded) becomes the newest amax of its operand and updates its scale; -1 changes nothing.
  const float* update_from(pass p, const float* amaxes);

  /// Frees the fp32 scratch of the rounded operands (the scales and histories stay).
  void release() { x_ = tensor::tensor(), w_ = tensor::tensor(), dy_ = tensor::tensor(); }

  /// The delayed recipe's state across steps (input, weight and gradient histories and scales,
  /// each as delayed_scaling::append_state lays it out: 3 x (history + 1) floats), which a
  /// checkpoint keeps as TE keeps a module's fp8 extra state; empty for the recipes that scale
  /// from the tensor itself. set_state() throws std::invalid_argument on another history length.
  std::vector<float> state() const;
  void set_state(const std::vector<float>& state);

  const delayed_scaling& input_scaling() const { return input_; }
  const delayed_scaling& weight_scaling() const { return weight_; }
  const delayed_scaling& grad_output_scaling() const { return grad_output_; }

 private:
  struct forward_record {
    std::uint64_t fingerprint;
    float input_scale, weight_scale;
  };
  std::optional<forward_record> take_record(std::uint64_t fingerprint, bool erase);
  tensor::tensor_view rounded(tensor::tensor& scratch, tensor::const_tensor_view v, int rows,
                              int cols, gemm_operand operand, gemm_usage usage, float scale);

  tensor::tensor_view primary_weight(int out, int in);

  fp8_settings settings_;
  const std::uint8_t* primary_bytes_ = nullptr;  // --fp8-param-gather: the fp8 weight, or null
  const float* primary_scale_inv_ = nullptr;
  delayed_scaling input_, weight_, grad_output_;
  bool deferred_ = false;
  bool forward_recorded_ = false, backward_recorded_ = false;  // since the last update
  std::deque<forward_record> forwards_;  // delayed: the scales of forwards awaiting backward
  tensor::tensor x_, w_, dy_;             // fp32 scratch: the rounded operands
};

}  // namespace mactor::model
