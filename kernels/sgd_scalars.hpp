// The hyperparameters of one SGD step (kernels/sgd.hpp) and the float scalars every backend's
// element loop uses, made once on the host. Plain C++ (nvcc compiles it too).
#pragma once

namespace mactor::kernels {

struct sgd_hyperparameters {
  double lr = 0;
  double weight_decay = 0;
  double momentum = 0;   ///< --sgd-momentum; 0: no buffer
  double dampening = 0;
  bool nesterov = false;
  bool first_step = false;  ///< the buffer is taken as d_p itself (torch's clone on the first step)
};

/// The step's scalars as the element loop uses them.
struct sgd_scalars {
  float weight_decay, momentum, keep, neg_lr;
  bool use_weight_decay, use_momentum, first_step, nesterov;
};

inline sgd_scalars sgd_scalars_for(const sgd_hyperparameters& h) {
  sgd_scalars k{};
  k.weight_decay = static_cast<float>(h.weight_decay);
  k.momentum = static_cast<float>(h.momentum);
  k.keep = static_cast<float>(1.0 - h.dampening);
  k.neg_lr = static_cast<float>(-h.lr);
  k.use_weight_decay = h.weight_decay != 0.0;
  k.use_momentum = h.momentum != 0.0;
  k.nesterov = h.nesterov;
  k.first_step = k.use_momentum && h.first_step;
  return k;
}

}  // namespace mactor::kernels
