// GPT model: the whole model as one chunk, forward then backward.
#include "model/gpt_model.hpp"

namespace mactor::model {

gpt_model::gpt_model(const gpt_model_config& config, group& tp)
    : chunk_(config, tp, chunk_layout{0, config.num_layers, true, true}) {}

loss_and_count gpt_model::forward_backward(const micro_batch& b, double grad_scale) {
  const auto result = chunk_.forward(0, b, {}, {}, true, true, grad_scale, step_);
  chunk_.backward(0, {}, {});
  ++step_;
  return result;
}

loss_and_count gpt_model::forward_only(const micro_batch& b, bool apply_dropout) {
  return chunk_.forward(0, b, {}, {}, apply_dropout, false, 0.0, step_);
}

}  // namespace mactor::model
