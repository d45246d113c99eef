// LayerNorm / RMSNorm module over the kernels.
#include "model/norm.hpp"

#include "kernels/layernorm.hpp"
#include "kernels/rmsnorm.hpp"

namespace mactor::model {

template <typename T>
norm<T>::norm(parameter_store<T>& store, const std::string& name, const gpt_model_config& c)
    : kind_(c.normalization), eps_(T(c.norm_epsilon)), one_p_(c.apply_layernorm_1p),
      hidden_(c.hidden_size) {
  weight_ = store.add(name + ".weight", {hidden_}, tp_split::replicated,
                      one_p_ ? init_kind::zeros : init_kind::ones);
  if (kind_ == normalization_kind::layer_norm)
    bias_ = store.add(name + ".bias", {hidden_}, tp_split::replicated, init_kind::zeros);
  // Under sequence parallelism the norm sees only this rank's positions (Megatron marks its
  // weights sequence_parallel whenever the config has it).
  store[weight_].sequence_parallel = c.sequence_parallel;
  if (bias_ >= 0) store[bias_].sequence_parallel = c.sequence_parallel;
}

template <typename T>
void norm<T>::forward(const parameter_store<T>& store, const T* x, T* y, int rows) {
  mean_.resize(rows);
  rstd_.resize(rows);
  if (kind_ == normalization_kind::layer_norm)
    kernels::layernorm_forward<T>(y, mean_.data(), rstd_.data(), x, store.value(weight_),
                                  store.value(bias_), rows, hidden_, eps_, one_p_);
  else
    kernels::rmsnorm_forward<T>(y, rstd_.data(), x, store.value(weight_), rows, hidden_, eps_,
                                one_p_);
}

template <typename T>
void norm<T>::backward(parameter_store<T>& store, const T* dy, const T* x, T* dx, int rows,
                       bool accumulate) {
  if (kind_ == normalization_kind::layer_norm)
    kernels::layernorm_backward<T>(dx, store.grad(weight_), store.grad(bias_), dy, x,
                                   store.value(weight_), mean_.data(), rstd_.data(), rows,
                                   hidden_, one_p_, accumulate);
  else
    kernels::rmsnorm_backward<T>(dx, store.grad(weight_), dy, x, store.value(weight_),
                                 rstd_.data(), rows, hidden_, one_p_, accumulate);
}

template class norm<float>;
template class norm<double>;

}  // namespace mactor::model
