// LayerNorm / RMSNorm module over the kernels.
#include "model/norm.hpp"

#include "kernels/dispatch.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/rmsnorm.hpp"
#include "model/activation.hpp"

namespace mactor::model {

norm::norm(parameter_store& store, const std::string& name, const gpt_model_config& c)
    : norm(store, name + ".weight", name + ".bias", c) {}

norm norm::fused_into(parameter_store& store, const std::string& linear, const gpt_model_config& c) {
  return norm(store, linear + ".layer_norm_weight", linear + ".layer_norm_bias", c);
}

norm::norm(parameter_store& store, const std::string& weight_name, const std::string& bias_name,
           const gpt_model_config& c)
    : kind_(c.normalization), eps_(c.norm_epsilon), one_p_(c.apply_layernorm_1p),
      hidden_(c.hidden_size) {
  weight_ = store.add(weight_name, {hidden_}, tp_split::replicated,
                      one_p_ ? init_kind::zeros : init_kind::ones);
  if (kind_ == normalization_kind::layer_norm)
    bias_ = store.add(bias_name, {hidden_}, tp_split::replicated, init_kind::zeros);
  // Under sequence parallelism the norm sees only this rank's positions (Megatron marks its
  // weights sequence_parallel whenever the config has it).
  store[weight_].sequence_parallel = c.sequence_parallel;
  if (bias_ >= 0) store[bias_].sequence_parallel = c.sequence_parallel;
}

norm::norm(parameter_store& store, const std::string& name, const gpt_model_config& c, int width)
    : kind_(c.normalization), eps_(c.norm_epsilon), one_p_(c.apply_layernorm_1p), hidden_(width) {
  weight_ = store.add(name + ".weight", {hidden_}, tp_split::replicated,
                      one_p_ ? init_kind::zeros : init_kind::ones);
  if (kind_ == normalization_kind::layer_norm)
    bias_ = store.add(name + ".bias", {hidden_}, tp_split::replicated, init_kind::zeros);
  store[weight_].partial_over_heads = true;
  if (bias_ >= 0) store[bias_].partial_over_heads = true;
}

void norm::forward(const parameter_store& store, tensor::const_tensor_view x,
                   tensor::tensor_view y, int rows) {
  // Statistics in the compute dtype (fp32 for a 16-bit model, as Transformer Engine keeps them).
  const auto stats = kernels::compute_dtype(x.type);
  auto rstd = ensure_activation(rstd_, rows, 1, stats);
  if (kind_ == normalization_kind::layer_norm)
    kernels::layernorm_forward(y, ensure_activation(mean_, rows, 1, stats), rstd, x,
                               store.value(weight_), store.value(bias_), rows, hidden_, eps_,
                               one_p_);
  else
    kernels::rmsnorm_forward(y, rstd, x, store.value(weight_), rows, hidden_, eps_, one_p_);
}

void norm::backward(parameter_store& store, tensor::const_tensor_view dy,
                    tensor::const_tensor_view x, tensor::tensor_view dx, int rows,
                    bool accumulate) {
  auto& weight_grads = store.weight_grads();
  if (!weight_grads.collecting()) return gradients(store, dy, x, mean_, rstd_, dx, rows, accumulate, true);
  // A zero-bubble backward: the weight gradients wait for the W pass, on copies of what they read
  // (taken first: dx may be dy's memory; an RMSNorm's mean is empty and stays so).
  weight_grads.add({dy, x, mean_, rstd_}, [&store, this, rows](auto in) {
    gradients(store, in[0], in[1], in[2], in[3], {}, rows, false, true);
  });
  gradients(store, dy, x, mean_, rstd_, dx, rows, accumulate, false);
}

void norm::gradients(parameter_store& store, tensor::const_tensor_view dy, tensor::const_tensor_view x,
                     tensor::const_tensor_view mean, tensor::const_tensor_view rstd, tensor::tensor_view dx,
                     int rows, bool accumulate, bool weights) const {
  const tensor::tensor_view dgamma = weights ? store.grad(weight_) : tensor::tensor_view{};
  if (kind_ == normalization_kind::layer_norm)
    kernels::layernorm_backward(dx, dgamma, weights ? store.grad(bias_) : tensor::tensor_view{}, dy, x,
                                store.value(weight_), mean, rstd, rows, hidden_, one_p_, accumulate);
  else
    kernels::rmsnorm_backward(dx, dgamma, dy, x, store.value(weight_), rstd, rows, hidden_, one_p_, accumulate);
}

}  // namespace mactor::model
