// Gradient norm, clipping, zero count and params norm (Megatron-Core clip_grads.py semantics).
#include "model/grad_clip.hpp"

#include <cmath>

#include "kernels/reductions.hpp"
#include "kernels/tensor_ops.hpp"

namespace mactor::model {

namespace {

// A per-tensor statistic summed over the params that count in the statistics (each tensor's
// own sum first, which keeps the double rounding error small), on whatever device they are.
template <class Fn>
double sum_over(std::span<const optim_param> params, Fn per_tensor) {
  double total = 0.0;
  for (const optim_param& p : params)
    if (p.in_grad_stats) total += per_tensor(p);
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
  return sum_over(params, [](const optim_param& p) { return kernels::sum_of_squares(p.grad_view()); });
}

double local_grad_zeros(std::span<const optim_param> params) {
  return sum_over(params, [](const optim_param& p) { return kernels::count_zeros(p.grad_view()); });
}

double local_param_sum_of_squares(std::span<const optim_param> params) {
  return sum_over(params, [](const optim_param& p) { return kernels::sum_of_squares(p.value_view()); });
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
  for (const optim_param& p : params) kernels::scale(p.grad_view(), double(scale));
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
