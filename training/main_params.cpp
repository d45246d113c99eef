// fp32 main parameters beside a 16-bit model.
#include "training/main_params.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

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

std::vector<main_params::held_part> main_params::held(std::size_t c, std::size_t begin, std::size_t end) {
  auto& store = chunks_[c].store();
  float* base = separate() ? copies_[c].host<float>().data() : store.values<float>().data();
  std::vector<held_part> out;
  for (const auto& h : store.held(begin, end)) out.push_back({h.begin, h.end, base + h.at});
  return out;
}

float* main_params::value_at(std::size_t c, std::size_t flat) {
  const auto parts = held(c, flat, flat + 1);
  if (parts.empty())
    throw std::logic_error("main_params: flat element " + std::to_string(flat) + " of chunk " + std::to_string(c) +
                           " is not in this rank's shard");
  return parts.front().values;
}

void main_params::copy_to_model(std::size_t c, std::size_t begin, std::size_t end) {
  if (!separate()) return;
  auto& store = chunks_[c].store();
  for (const auto& h : store.held(begin, end)) {
    const auto lo = static_cast<std::int64_t>(h.at), hi = static_cast<std::int64_t>(h.at + (h.end - h.begin));
    kernels::convert(store.value_tensor().view().rows(lo, hi), copies_[c].view().rows(lo, hi));
  }
}

void main_params::copy_all_to_model() {
  for (std::size_t c = 0; c < copies_.size(); ++c) kernels::convert(chunks_[c].store().value_tensor(), copies_[c]);
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
