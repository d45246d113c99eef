// fp16 master weights as TE's FusedAdam stores them.
#include "training/fp16_main_params.hpp"

namespace mactor::training {

void fp16_main_params::store(std::span<const model::optim_param> params) {
  if (masters_.size() != params.size()) masters_.assign(params.size(), model::scaled_state(model::state_dtype::fp16));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::span<float> values(params[i].value, params[i].numel);
    masters_[i].set(values);
    masters_[i].unscale(values);
  }
}

std::size_t fp16_main_params::bytes() const {
  std::size_t n = 0;
  for (const auto& m : masters_) n += m.bytes();
  return n;
}

}  // namespace mactor::training
