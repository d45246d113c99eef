// SGD with momentum and L2 weight decay (torch.optim.SGD, Megatron's --optimizer sgd), following
// torch's single-tensor CPU path.
#pragma once

#include <span>
#include <vector>

#include "model/optimizer.hpp"
#include "model/optimizer_state.hpp"

namespace mactor::model {

struct sgd_options {
  double momentum = 0.9;  ///< --sgd-momentum
  double dampening = 0.0;
  bool nesterov = false;
};

/// Per-param state as torch names it; the buffer stays empty until the first step (and
/// forever with momentum 0). It lives on the parameter's device, counted in its ledger.
struct sgd_param_state {
  scaled_state momentum_buffer{state_dtype::fp32};  ///< numel fp32 values
};

class sgd_optimizer final : public optimizer {
 public:
  sgd_optimizer(std::vector<optim_param> params, std::vector<param_group> groups,
                sgd_options options);

  void step() override;

  const sgd_options& options() const { return options_; }
  std::span<sgd_param_state> state() { return state_; }
  std::span<const sgd_param_state> state() const { return state_; }
  std::size_t state_bytes() const override {
    std::size_t bytes = 0;
    for (const auto& s : state_) bytes += s.momentum_buffer.bytes();
    return bytes;
  }

 private:
  void update(const optim_param& p, sgd_param_state& s, double lr, double weight_decay);

  sgd_options options_;
  std::vector<sgd_param_state> state_;
};

}  // namespace mactor::model
