// One layer of the decoder stack: a transformer_layer (a GPT's layers, and a hybrid model's
// attention-only and MLP-only layers) or a mamba_layer (a hybrid model's 'M' layers), as
// Megatron-Core's MambaStack builds layer i from the hybrid allocation.
#pragma once
#include <cstdint>
#include <variant>

#include "model/activation_stash.hpp"
#include "model/gpt_model_config.hpp"
#include "model/mamba_layer.hpp"
#include "model/transformer_layer.hpp"

namespace mactor::model {

class decoder_layer {
 public:
  /// Global layer `number` (0-based) of the config: a Mamba layer where the hybrid allocation
  /// says 'M', a transformer layer otherwise.
  decoder_layer(parameter_store& store, int number, const gpt_model_config& config, int tp_rank,
                int tp_size, group* cp, moe_groups moe);
  /// After store.allocate(): what the store's initializer cannot draw (the Mamba mixer's).
  void initialize(parameter_store& store, std::uint64_t seed, int tp_rank) const;
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
               tensor::tensor_view y, int seq, int batch, bool training, std::uint64_t step);
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view x,
                tensor::const_tensor_view dy, tensor::tensor_view dx);
  void release();
  /// The state the backward reads from the last forward, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s);
  /// The micro-batch's document mask for the attention (null: causal); a Mamba layer's scan
  /// runs over the whole sequence, as Megatron's mixer does.
  void set_document_starts(const std::int32_t* starts);
  /// The MoE layer in place of the MLP, or null.
  moe_layer* moe();
  const moe_layer* moe() const;

 private:
  std::variant<transformer_layer, mamba_layer> layer_;
};

}  // namespace mactor::model
