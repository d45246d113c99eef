// Adam / AdamW. Scalars are computed in double as Python does, then each tensor operation runs
// in fp32 in torch's order, so results track torch.optim.AdamW to a few ulps.
#include "model/optimizer_adam.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace mactor::model {

namespace {

struct adam_scalars {
  float decay, l2, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps,
      neg_step_size;
  bool decoupled, apply_l2;
};

// torch 1.13's _single_tensor_adamw, one element at a time: decay the param, update the two
// moments, then param += -step_size * exp_avg / (sqrt(exp_avg_sq) / sqrt(bc2) + eps). torch's
// vectorized add(alpha=) is a fused multiply-add; addcmul and addcdiv are not.
__attribute__((target_clones("fma", "default"))) void adam_update(
    float* __restrict value, const float* __restrict grad, float* __restrict m,
    float* __restrict v, std::size_t n, adam_scalars k) {
  for (std::size_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (k.decoupled) value[i] = value[i] * k.decay;
    else if (k.apply_l2) g = std::fma(k.l2, value[i], g);
    m[i] = std::fma(k.one_minus_beta1, g, m[i] * k.beta1);
    v[i] = v[i] * k.beta2 + k.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v[i]) / k.bias_correction2_sqrt + k.eps;
    value[i] = value[i] + k.neg_step_size * m[i] / denom;
  }
}

}  // namespace

adam_optimizer::adam_optimizer(std::vector<optim_param> params, std::vector<param_group> groups,
                               adam_options options)
    : optimizer(std::move(params), std::move(groups)), options_(options),
      state_(params_.size(), adam_param_state{0, scaled_state(options.exp_avg_dtype),
                                              scaled_state(options.exp_avg_sq_dtype)}) {
  if (!(options_.beta1 >= 0.0 && options_.beta1 < 1.0) ||
      !(options_.beta2 >= 0.0 && options_.beta2 < 1.0))
    throw std::invalid_argument("--adam-beta1 and --adam-beta2 must lie in [0, 1); got " +
                                std::to_string(options_.beta1) + " and " +
                                std::to_string(options_.beta2));
  if (!(options_.eps >= 0.0))
    throw std::invalid_argument("--adam-eps must be >= 0; got " + std::to_string(options_.eps));
}

void adam_optimizer::step() {
  for (const param_group& g : groups_)
    for (std::size_t i : g.params) update(params_[i], state_[i], g.lr, g.weight_decay);
}

void adam_optimizer::update(const optim_param& p, adam_param_state& s, double lr,
                            double weight_decay) {
  if (s.exp_avg.size() != p.numel) {
    s.exp_avg.zero(p.numel);
    s.exp_avg_sq.zero(p.numel);
  }
  s.step += 1;
  const double step = static_cast<double>(s.step);
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, step);
  adam_scalars k{};
  k.decoupled = options_.decoupled_weight_decay;
  k.apply_l2 = !k.decoupled && weight_decay != 0.0;
  k.decay = static_cast<float>(1.0 - lr * weight_decay);
  k.l2 = static_cast<float>(weight_decay);
  k.beta1 = static_cast<float>(options_.beta1);
  k.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  k.beta2 = static_cast<float>(options_.beta2);
  k.one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  k.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  k.eps = static_cast<float>(options_.eps);
  k.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  // fp32 moments update in place; others as FusedAdam runs them: unscaled into fp32 copies,
  // updated, rescaled and rounded back.
  float* m = s.exp_avg.fp32_data();
  float* v = s.exp_avg_sq.fp32_data();
  if (!m) {
    wide_exp_avg_.resize(p.numel);
    s.exp_avg.unscale(wide_exp_avg_);
    m = wide_exp_avg_.data();
  }
  if (!v) {
    wide_exp_avg_sq_.resize(p.numel);
    s.exp_avg_sq.unscale(wide_exp_avg_sq_);
    v = wide_exp_avg_sq_.data();
  }
  adam_update(p.value, p.grad, m, v, p.numel, k);
  if (!s.exp_avg.fp32_data()) s.exp_avg.set(std::span<const float>(m, p.numel));
  if (!s.exp_avg_sq.fp32_data()) s.exp_avg_sq.set(std::span<const float>(v, p.numel));
}

}  // namespace mactor::model
