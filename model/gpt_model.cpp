// GPT model: the whole model as one chunk, forward then backward.
#include "model/gpt_model.hpp"

namespace mactor::model {

template <typename T>
gpt_model<T>::gpt_model(const gpt_model_config& config, group& tp)
    : chunk_(config, tp, chunk_layout{0, config.num_layers, true, true}) {}

template <typename T>
loss_and_count gpt_model<T>::forward_backward(const micro_batch& b, T grad_scale) {
  const auto result = chunk_.forward(0, b, nullptr, nullptr, true, true, grad_scale, step_);
  chunk_.backward(0, nullptr, nullptr);
  ++step_;
  return result;
}

template <typename T>
loss_and_count gpt_model<T>::forward_only(const micro_batch& b, bool apply_dropout) {
  return chunk_.forward(0, b, nullptr, nullptr, apply_dropout, false, T(0), step_);
}

template class gpt_model<float>;
template class gpt_model<double>;

}  // namespace mactor::model
