// MLP block over the kernels.
#include "model/mlp.hpp"

#include <cmath>

#include "kernels/gelu.hpp"
#include "kernels/swiglu.hpp"

namespace mactor::model {

template <typename T>
mlp<T>::mlp(parameter_store<T>& store, const std::string& name, const gpt_model_config& c,
            int tp_size)
    : swiglu_(c.swiglu), tanh_gelu_(c.gelu_tanh_approximation),
      ffn_local_(c.ffn_hidden_size / tp_size),
      linear_fc1_(store, name + ".linear_fc1", c.hidden_size,
                  c.swiglu ? 2 * c.ffn_hidden_size : c.ffn_hidden_size, c.add_bias_linear,
                  c.swiglu ? tp_split::row_halves : tp_split::rows, c.init_method_std, tp_size,
                  c.sequence_parallel),
      linear_fc2_(store, name + ".linear_fc2", c.ffn_hidden_size, c.hidden_size,
                  c.add_bias_linear, c.init_method_std / std::sqrt(2.0 * c.num_layers), tp_size,
                  c.sequence_parallel) {}

template <typename T>
void mlp<T>::forward(const parameter_store<T>& store, group& tp, const T* x, T* out, int rows) {
  rows_ = rows;
  fc1_.resize(std::size_t(rows) * linear_fc1_.out_local());
  act_.resize(std::size_t(rows) * ffn_local_);
  linear_fc1_.forward(store, tp, x, fc1_.data(), rows);
  if (swiglu_)
    kernels::swiglu_forward<T>(act_.data(), fc1_.data(), rows, ffn_local_);
  else
    kernels::gelu_forward<T>(act_.data(), fc1_.data(), std::int64_t(rows) * ffn_local_,
                             tanh_gelu_);
  linear_fc2_.forward(store, tp, act_.data(), out, rows);
}

template <typename T>
void mlp<T>::backward(parameter_store<T>& store, group& tp, const T* dout, const T* x, T* dx) {
  dact_.resize(act_.size());
  dfc1_.resize(fc1_.size());
  linear_fc2_.backward(store, tp, dout, act_.data(), dact_.data(), rows_);
  if (swiglu_)
    kernels::swiglu_backward<T>(dfc1_.data(), dact_.data(), fc1_.data(), rows_, ffn_local_);
  else
    kernels::gelu_backward<T>(dfc1_.data(), dact_.data(), fc1_.data(),
                              std::int64_t(rows_) * ffn_local_, tanh_gelu_);
  linear_fc1_.backward(store, tp, dfc1_.data(), x, dx, rows_);
}

template class mlp<float>;
template class mlp<double>;

}  // namespace mactor::model
