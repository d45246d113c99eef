// A decoder layer: dispatch to the transformer or the Mamba layer it holds.
#include "model/decoder_layer.hpp"

namespace mactor::model {
namespace {
std::variant<transformer_layer, mamba_layer> build(parameter_store& store, int number,
                                                   const gpt_model_config& c, int tp_rank,
                                                   int tp_size, group* cp, moe_groups moe) {
  if (c.hybrid_layer_kind(number) == 'M')
    return std::variant<transformer_layer, mamba_layer>(std::in_place_type<mamba_layer>, store, number, c, tp_size,
                                                        cp);
  return std::variant<transformer_layer, mamba_layer>(std::in_place_type<transformer_layer>, store, number, c,
                                                      tp_rank, tp_size, cp, moe);
}
}  // namespace

decoder_layer::decoder_layer(parameter_store& store, int number, const gpt_model_config& c,
                             int tp_rank, int tp_size, group* cp, moe_groups moe)
    : layer_(build(store, number, c, tp_rank, tp_size, cp, moe)) {}

void decoder_layer::initialize(parameter_store& store, std::uint64_t seed, int tp_rank) const {
  if (const auto* m = std::get_if<mamba_layer>(&layer_)) m->initialize(store, seed, tp_rank);
}

void decoder_layer::forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                            tensor::tensor_view y, int seq, int batch, bool training,
                            std::uint64_t step) {
  std::visit([&](auto& l) { l.forward(store, tp, x, y, seq, batch, training, step); }, layer_);
}

void decoder_layer::backward(parameter_store& store, group& tp, tensor::const_tensor_view x,
                             tensor::const_tensor_view dy, tensor::tensor_view dx) {
  std::visit([&](auto& l) { l.backward(store, tp, x, dy, dx); }, layer_);
}

void decoder_layer::carry(activation_stash& s) {
  std::visit([&](auto& l) { l.carry(s); }, layer_);
}

void decoder_layer::release() {
  std::visit([](auto& l) { l.release(); }, layer_);
}

void decoder_layer::set_document_starts(const std::int32_t* starts) {
  if (auto* t = std::get_if<transformer_layer>(&layer_)) t->set_document_starts(starts);
}

moe_layer* decoder_layer::moe() {
  auto* t = std::get_if<transformer_layer>(&layer_);
  return t ? t->moe() : nullptr;
}

const moe_layer* decoder_layer::moe() const {
  const auto* t = std::get_if<transformer_layer>(&layer_);
  return t ? t->moe() : nullptr;
}

}  // namespace mactor::model
