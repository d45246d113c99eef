// One region's amax step: gather the newest amaxes, MAX all-reduce them, update every scale.
#include "model/fp8_amax_reduction.hpp"

namespace mactor::model {

fp8_amax_reduction::fp8_amax_reduction(const std::vector<fp8_linear*>& linears) {
  for (auto* l : linears)
    if (l->settings().recipe == fp8_recipe::delayed) {
      l->defer_updates();
      linears_.push_back(l);
    }
}

void fp8_amax_reduction::after(fp8_linear::pass p) {
  if (linears_.empty()) return;
  buffer_.clear();
  for (const auto* l : linears_) l->amax_of(p, buffer_);
  if (group_ && group_->size() > 1) group_->all_reduce_max(buffer_.data(), buffer_.size());
  const float* next = buffer_.data();
  for (auto* l : linears_) next = l->update_from(p, next);
}

}  // namespace mactor::model
