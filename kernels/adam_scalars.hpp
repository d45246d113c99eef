// The hyperparameters of one Adam / AdamW step (kernels/adam.hpp) and the float scalars every
// backend's element loop uses, made once on the host. Plain C++ (nvcc compiles it too).
#pragma once

#include <cmath>
#include <cstdint>

namespace mactor::kernels {

struct adam_hyperparameters {
  double lr = 0;
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool decoupled_weight_decay = true;  // AdamW; false: L2 added to the gradient
  std::int64_t step = 1;               // counts from 1
};

/// The step's scalars as the element loop uses them.
struct adam_scalars {
  bool decoupled, apply_l2;
  float decay, l2, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size;
};

inline adam_scalars adam_scalars_for(const adam_hyperparameters& h) {
  const double step = static_cast<double>(h.step);
  const double bias_correction1 = 1.0 - std::pow(h.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(h.beta2, step);
  adam_scalars k{};
  k.decoupled = h.decoupled_weight_decay;
  k.apply_l2 = !k.decoupled && h.weight_decay != 0.0;
  k.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  k.l2 = static_cast<float>(h.weight_decay);
  k.beta1 = static_cast<float>(h.beta1), k.one_minus_beta1 = static_cast<float>(1.0 - h.beta1);
  k.beta2 = static_cast<float>(h.beta2), k.one_minus_beta2 = static_cast<float>(1.0 - h.beta2);
  k.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  k.eps = static_cast<float>(h.eps);
  k.neg_step_size = static_cast<float>(-(h.lr / bias_correction1));
  return k;
}

}  // namespace mactor::kernels
