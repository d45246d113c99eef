// Gradient norm, clipping, zero count and params norm (Megatron-Core clip_grads.py semantics).
#include "model/grad_clip.hpp"

#include <cmath>

namespace mactor::model {

namespace {

template <class Fn>
double sum_over(std::span<const optim_param> params, Fn per_element) {
  double total = 0.0;
  for (const optim_param& p : params) {
    if (!p.in_grad_stats) continue;
    double sum = 0.0;  // per-tensor partial sums keep the double rounding error small
    for (std::size_t i = 0; i < p.numel; ++i) sum += per_element(p, i);
    total += sum;
  }
  return total;
}

double reduced(double local, const sum_reducer& reduce) {
  if (!reduce) return local;
  double value[1] = {local};
  reduce(value);
  return value[0];
}

}  // namespace

double local_grad_sum_of_squares(std::span<const optim_param> params) {
  return sum_over(params, [](const optim_param& p, std::size_t i) {
    const double g = p.grad[i];
    return g * g;
  });
}

double local_grad_zeros(std::span<const optim_param> params) {
  return sum_over(params,
                  [](const optim_param& p, std::size_t i) { return p.grad[i] == 0.0f ? 1.0 : 0.0; });
}

double local_param_sum_of_squares(std::span<const optim_param> params) {
  return sum_over(params, [](const optim_param& p, std::size_t i) {
    const double v = p.value[i];
    return v * v;
  });
}

double grad_norm(std::span<const optim_param> params, const sum_reducer& reduce) {
  return std::sqrt(reduced(local_grad_sum_of_squares(params), reduce));
}

bool clip_grads_by_total_norm(std::span<const optim_param> params, double max_norm,
                              double total_norm) {
  const double clip_coeff = max_norm / (total_norm + 1.0e-6);
  if (!(clip_coeff < 1.0)) return false;
  // Megatron's multi_tensor_scale multiplies by the coefficient rounded to fp32.
  const float scale = static_cast<float>(clip_coeff);
  for (const optim_param& p : params)
    for (std::size_t i = 0; i < p.numel; ++i) p.grad[i] *= scale;
  return true;
}

double clip_grad_norm(std::span<const optim_param> params, double max_norm,
                      const sum_reducer& reduce) {
  const double total_norm = grad_norm(params, reduce);
  clip_grads_by_total_norm(params, max_norm, total_norm);
  return total_norm;
}

double count_zeros_in_grads(std::span<const optim_param> params, const sum_reducer& reduce) {
  return reduced(local_grad_zeros(params), reduce);
}

double params_norm(std::span<const optim_param> params, const sum_reducer& reduce) {
  return std::sqrt(reduced(local_param_sum_of_squares(params), reduce));
}

}  // namespace mactor::model
