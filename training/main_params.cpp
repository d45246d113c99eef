// fp32 main parameters beside a 16-bit model.
#include "training/main_params.hpp"

#include <algorithm>

#include "kernels/convert.hpp"

namespace mactor::training {

main_params::main_params(std::vector<model::gpt_chunk>& chunks) : chunks_(chunks) {
  for (auto& chunk : chunks_) {
    const auto& values = chunk.store().value_tensor();
    if (values.type() == tensor::dtype::float32) continue;
    tensor::tensor copy(values.shape(), tensor::dtype::float32, tensor::memory_kind::optimizer_state);
    kernels::convert(copy, values);
    copies_.push_back(std::move(copy));
  }
  if (!copies_.empty() && copies_.size() != chunks_.size())
    throw std::logic_error("main_params: the chunks of one stage mix fp32 and 16-bit values");
}

float* main_params::values(std::size_t c) {
  // Indexed by flat element: a sharded store's buffer starts at its first held element.
  const auto first = static_cast<std::ptrdiff_t>(chunks_[c].store().values_begin());
  if (separate()) return copies_[c].host<float>().data() - first;
  return chunks_[c].store().values<float>().data() - first;
}

void main_params::copy_to_model(std::size_t c, std::size_t begin, std::size_t end) {
  if (!separate()) return;
  // Flat elements [begin, end) that this rank holds, as places in its buffers.
  const std::size_t first = chunks_[c].store().values_begin();
  const auto numel = static_cast<std::size_t>(copies_[c].numel());
  begin = std::max(begin, first) - first;
  end = std::min(end > first ? end - first : 0, numel);
  if (begin >= end) return;
  const auto lo = static_cast<std::int64_t>(begin), hi = static_cast<std::int64_t>(end);
  kernels::convert(chunks_[c].store().value_tensor().view().rows(lo, hi), copies_[c].view().rows(lo, hi));
}

void main_params::copy_all_to_model() {
  for (std::size_t c = 0; c < copies_.size(); ++c)
    copy_to_model(c, 0, chunks_[c].store().values_begin() + static_cast<std::size_t>(copies_[c].numel()));
}

void main_params::copy_all_from_model() {
  for (std::size_t c = 0; c < copies_.size(); ++c) kernels::convert(copies_[c], chunks_[c].store().value_tensor());
}

std::vector<float> main_params::model_values(std::size_t c) const {
  const auto& values = chunks_[c].store().value_tensor();
  tensor::tensor wide(values.shape(), tensor::dtype::float32, tensor::memory_kind::optimizer_state);
  kernels::convert(wide, values);
  const auto v = wide.host<float>();
  return {v.begin(), v.end()};
}

}  // namespace mactor::training
