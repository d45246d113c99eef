// Adam with decoupled weight decay (torch.optim.AdamW, Megatron's --optimizer adam) or with L2
// weight decay (torch.optim.Adam); the arithmetic follows torch's single-tensor CPU path. With
// Megatron's --use-precision-aware-optimizer the two moments may be stored in bf16, fp16 or fp8
// (Transformer Engine FusedAdam's exp_avg_dtype / exp_avg_sq_dtype): each step widens them to
// fp32, updates in fp32 and rounds them back (see model/optimizer_state.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/optimizer.hpp"
#include "model/optimizer_state.hpp"

namespace mactor::model {

struct adam_options {
  double beta1 = 0.9;    ///< --adam-beta1
  double beta2 = 0.999;  ///< --adam-beta2
  double eps = 1e-8;     ///< --adam-eps
  bool decoupled_weight_decay = true;  ///< true: AdamW; false: L2 added to the grad
  state_dtype exp_avg_dtype = state_dtype::fp32;     ///< --exp-avg-dtype
  state_dtype exp_avg_sq_dtype = state_dtype::fp32;  ///< --exp-avg-sq-dtype
};

/// Per-param state, named as torch's optimizer state dict names it (for checkpoints).
struct adam_param_state {
  std::int64_t step = 0;
  scaled_state exp_avg;     ///< numel, in adam_options::exp_avg_dtype
  scaled_state exp_avg_sq;  ///< numel, in adam_options::exp_avg_sq_dtype
};

class adam_optimizer final : public optimizer {
 public:
  adam_optimizer(std::vector<optim_param> params, std::vector<param_group> groups,
                 adam_options options);

  void step() override;

  const adam_options& options() const { return options_; }
  /// State of params()[i]; empty states and step 0 before the first step.
  std::span<adam_param_state> state() { return state_; }
  std::span<const adam_param_state> state() const { return state_; }
  std::size_t state_bytes() const override {
    std::size_t bytes = 0;
    for (const auto& s : state_) bytes += s.exp_avg.bytes() + s.exp_avg_sq.bytes();
    return bytes;
  }

 private:
  void update(const optim_param& p, adam_param_state& s, double lr, double weight_decay);

  adam_options options_;
  std::vector<adam_param_state> state_;
  std::vector<float> wide_exp_avg_, wide_exp_avg_sq_;  // fp32 copies of 16- and 8-bit moments
};

}  // namespace mactor::model
