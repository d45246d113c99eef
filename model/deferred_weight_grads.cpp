// The deferred weight-gradient queue.
#include "model/deferred_weight_grads.hpp"

#include "tensor/transfer.hpp"

namespace mactor::model {

void deferred_weight_grads::begin_collecting(int microbatch, bool copy_inputs) {
  collecting_ = true;
  microbatch_ = microbatch;
  copy_inputs_ = copy_inputs;
}

void deferred_weight_grads::add(std::initializer_list<tensor::const_tensor_view> inputs, work w) {
  if (!collecting_) {
    const std::vector<tensor::const_tensor_view> views(inputs);
    w(views);
    return;
  }
  item it{microbatch_, {}, {}, std::move(w)};
  if (!copy_inputs_) {
    it.views.assign(inputs);
    queue_.push_back(std::move(it));
    return;
  }
  it.inputs.reserve(inputs.size());
  for (const auto& v : inputs) {
    if (!v.data) {  // an input the work does without (an RMSNorm's mean) stays an empty view
      it.inputs.emplace_back();
      continue;
    }
    it.inputs.push_back(tensor::copy_to(v, v.where, tensor::memory_kind::activations));  // beside the input
    pending_bytes_ += static_cast<std::int64_t>(v.nbytes());
  }
  queue_.push_back(std::move(it));
}

void deferred_weight_grads::run(int microbatch) {
  std::vector<tensor::const_tensor_view> views;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->microbatch != microbatch) {
      ++it;
      continue;
    }
    views = it->views;
    for (const auto& t : it->inputs) {
      views.push_back(t.view());
      pending_bytes_ -= static_cast<std::int64_t>(t.nbytes());
    }
    it->w(views);
    it = queue_.erase(it);
  }
}

}  // namespace mactor::model
