// fp32 main gradients widened from a bf16 gradient buffer.
#include "training/main_grads.hpp"

#include <stdexcept>

#include "kernels/convert.hpp"

namespace mactor::training {
namespace {

// The reduced gradients chunk c's optimizer reads: its shard, or the whole buffer.
tensor::tensor_view reduced(std::vector<model::gpt_chunk>& chunks, grad_sync& sync, std::size_t c) {
  if (auto* shard = sync.shard_of(c)) return shard->grads.view();
  return chunks[c].store().grad_tensor().view();
}

bool is_16_bit(tensor::dtype t) { return t == tensor::dtype::bfloat16 || t == tensor::dtype::float16; }

}  // namespace

main_grads::main_grads(std::vector<model::gpt_chunk>& chunks, grad_sync& sync) : chunks_(chunks), sync_(sync) {
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const auto source = reduced(chunks_, sync_, c);
    if (!is_16_bit(source.type)) continue;
    copies_.emplace_back(source.shape, tensor::dtype::float32, tensor::memory_kind::gradients, source.where);
  }
  if (!copies_.empty() && copies_.size() != chunks_.size())
    throw std::logic_error("main_grads: the chunks of one stage mix fp32 and 16-bit gradient buffers");
}

float* main_grads::values(std::size_t c) {
  const auto v = separate() ? copies_[c].view() : reduced(chunks_, sync_, c);
  if (v.type != tensor::dtype::float32) tensor::detail::throw_mismatch(v.type, v.where, tensor::dtype::float32);
  return static_cast<float*>(v.data);  // on the model's device
}

void main_grads::copy_from_model() {
  for (std::size_t c = 0; c < copies_.size(); ++c) kernels::convert(copies_[c], reduced(chunks_, sync_, c));
}

}  // namespace mactor::training
