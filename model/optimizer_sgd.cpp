// SGD with momentum, in torch.optim.SGD's order: d_p = grad + wd*param; buf = momentum*buf +
// (1 - dampening)*d_p (a copy of d_p on the first step); param -= lr*buf. torch's vectorized
// CPU add(alpha=) is a fused multiply-add, so those steps use std::fma to match it bit for bit.
#include "model/optimizer_sgd.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace mactor::model {

namespace {

struct sgd_scalars {
  float weight_decay, momentum, keep, neg_lr;
  bool use_weight_decay, use_momentum, first_step, nesterov;
};

// One pass over a tensor; the fma clone keeps std::fma inline where the CPU has it.
__attribute__((target_clones("fma", "default"))) void sgd_update(
    float* __restrict value, const float* __restrict grad, float* __restrict buf, std::size_t n,
    sgd_scalars s) {
  for (std::size_t i = 0; i < n; ++i) {
    float d_p = s.use_weight_decay ? std::fma(s.weight_decay, value[i], grad[i]) : grad[i];
    if (s.use_momentum) {
      buf[i] = s.first_step ? d_p : std::fma(s.keep, d_p, buf[i] * s.momentum);
      d_p = s.nesterov ? std::fma(s.momentum, buf[i], d_p) : buf[i];
    }
    value[i] = std::fma(s.neg_lr, d_p, value[i]);
  }
}

}  // namespace

sgd_optimizer::sgd_optimizer(std::vector<optim_param> params, std::vector<param_group> groups,
                             sgd_options options)
    : optimizer(std::move(params), std::move(groups)), options_(options),
      state_(params_.size()) {
  if (!(options_.momentum >= 0.0))
    throw std::invalid_argument("--sgd-momentum must be >= 0; got " +
                                std::to_string(options_.momentum));
  if (options_.nesterov && (options_.momentum <= 0.0 || options_.dampening != 0.0))
    throw std::invalid_argument("Nesterov SGD needs --sgd-momentum > 0 and zero dampening");
}

void sgd_optimizer::step() {
  for (const param_group& g : groups_)
    for (std::size_t i : g.params) update(params_[i], state_[i], g.lr, g.weight_decay);
}

void sgd_optimizer::update(const optim_param& p, sgd_param_state& s, double lr,
                           double weight_decay) {
  if (p.where != tensor::cpu)
    throw tensor::tensor_error("SGD on " + tensor::to_string(p.where) +
                               " is not built yet: use --optimizer adam for a model on a GPU");
  sgd_scalars k{};
  k.weight_decay = static_cast<float>(weight_decay);
  k.momentum = static_cast<float>(options_.momentum);
  k.keep = static_cast<float>(1.0 - options_.dampening);
  k.neg_lr = static_cast<float>(-lr);
  k.use_weight_decay = weight_decay != 0.0;
  k.use_momentum = options_.momentum != 0.0;
  k.nesterov = options_.nesterov;
  k.first_step = k.use_momentum && s.momentum_buffer.size() != p.numel;
  if (k.first_step) {
    s.counted.set(std::int64_t(p.numel * sizeof(float)));
    s.momentum_buffer.resize(p.numel);
  }
  sgd_update(p.value, p.grad, k.use_momentum ? s.momentum_buffer.data() : nullptr, p.numel, k);
}

}  // namespace mactor::model
