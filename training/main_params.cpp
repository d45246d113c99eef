// fp32 main parameters beside a 16-bit model.
#include "training/main_params.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/convert.hpp"
#include "tensor/transfer.hpp"

namespace mactor::training {

main_params::main_params(std::vector<model::gpt_chunk>& chunks) : chunks_(chunks) {
  for (auto& chunk : chunks_) {
    auto& store = chunk.store();
    const auto& values = store.value_tensor();
    if (values.type() == tensor::dtype::float32) continue;
    tensor::tensor copy(values.shape(), tensor::dtype::float32, tensor::memory_kind::optimizer_state, values.where());
    kernels::convert(copy, values);
    copies_.push_back(std::move(copy));
    layouts_.push_back(store.held(0, store.flat_numel()));
  }
  if (!copies_.empty() && copies_.size() != chunks_.size())
    throw std::logic_error("main_params: the chunks of one stage mix fp32 and 16-bit values");
}

std::vector<main_params::held_part> main_params::held(std::size_t c, std::size_t begin, std::size_t end) {
  std::vector<held_part> out;
  if (!separate()) {
    auto& store = chunks_[c].store();
    auto* values = static_cast<float*>(store.value_tensor().data());  // on the model's device
    for (const auto& h : store.held(begin, end)) out.push_back({h.begin, h.end, values + h.at});
    return out;
  }
  for (const auto& r : layouts_[c]) {
    const std::size_t lo = std::max(begin, r.begin), hi = std::min(end, r.end);
    if (lo < hi) out.push_back({lo, hi, static_cast<float*>(copies_[c].data()) + r.at + (lo - r.begin)});
  }
  return out;
}

float* main_params::value_at(std::size_t c, std::size_t flat) {
  const auto parts = held(c, flat, flat + 1);
  if (parts.empty())
    throw std::logic_error("main_params: flat element " + std::to_string(flat) + " of chunk " + std::to_string(c) +
                           " is not in this rank's shard");
  return parts.front().values;
}

template <class F>
void main_params::for_each_shared(std::size_t c, std::size_t begin, std::size_t end, F f) const {
  auto& store = chunks_[c].store();
  for (const auto& r : layouts_[c]) {
    const std::size_t lo = std::max(begin, r.begin), hi = std::min(end, r.end);
    if (lo >= hi) continue;
    for (const auto& h : store.held(lo, hi))
      f(static_cast<std::int64_t>(h.at), static_cast<std::int64_t>(r.at + (h.begin - r.begin)),
        static_cast<std::int64_t>(h.end - h.begin));
  }
}

void main_params::copy_to_model(std::size_t c, std::size_t begin, std::size_t end) {
  if (!separate()) return;
  auto values = chunks_[c].store().value_tensor().view();
  auto copy = copies_[c].view();
  for_each_shared(c, begin, end, [&](std::int64_t v, std::int64_t m, std::int64_t n) {
    kernels::convert(values.rows(v, v + n), copy.rows(m, m + n));
  });
}

void main_params::copy_all_to_model() {
  for (std::size_t c = 0; c < copies_.size(); ++c) copy_to_model(c, 0, chunks_[c].store().flat_numel());
}

void main_params::copy_all_from_model() {
  for (std::size_t c = 0; c < copies_.size(); ++c) {
    auto values = chunks_[c].store().value_tensor().view();
    auto copy = copies_[c].view();
    for_each_shared(c, 0, chunks_[c].store().flat_numel(), [&](std::int64_t v, std::int64_t m, std::int64_t n) {
      kernels::convert(copy.rows(m, m + n), values.rows(v, v + n));
    });
  }
}

std::vector<float> main_params::model_values(std::size_t c) const {
  auto& store = chunks_[c].store();
  std::vector<float> out(store.flat_numel(), 0.0f);
  auto flat = tensor::view_of(std::span<float>(out));
  // Widened on the host, from a host copy of values on a device.
  const auto on_device = store.value_tensor().view();
  const tensor::tensor host_copy = on_device.where == tensor::cpu
                                       ? tensor::tensor()
                                       : tensor::copy_to(on_device, tensor::cpu, tensor::memory_kind::other);
  auto values = host_copy.defined() ? host_copy.view() : on_device;
  for (const auto& h : store.held(0, store.flat_numel())) {
    const auto n = static_cast<std::int64_t>(h.end - h.begin);
    kernels::convert(flat.rows(static_cast<std::int64_t>(h.begin), static_cast<std::int64_t>(h.begin) + n),
                     values.rows(static_cast<std::int64_t>(h.at), static_cast<std::int64_t>(h.at) + n));
  }
  return out;
}

}  // namespace mactor::training
