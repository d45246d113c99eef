// Megatron-Core's MambaLayer as its mamba_stack_spec builds it:
// y = x + dropout(mixer(norm(x))), rows in [seq, batch] order, where the norm is the model's
// --normalization, fused into the mixer's in_proj as Transformer Engine's
// TELayerNormColumnParallelLinear holds it, and the mixer is the Mamba-2 mixer (no bias).
#pragma once
#include <cstdint>

#include "model/activation_stash.hpp"
#include "model/context_parallel.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/mamba_mixer.hpp"
#include "model/norm.hpp"
#include "model/parameter.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

/// The mixer a hybrid model's Mamba layers build from the model's config (fp8 as the config's
/// layer `layer` runs it: --first-last-layers-bf16 keeps the first and last layers out).
mamba_mixer_config mamba_mixer_config_of(const gpt_model_config& config, int layer);

class mamba_layer {
 public:
  /// Registers decoder.layers.<number>.mixer.{in_proj.layer_norm_weight (and _bias for
  /// LayerNorm), in_proj.weight, conv1d, dt_bias, A_log, D, norm.weight, out_proj.weight}.
  /// cp: the context-parallel group (needed when config.context_parallel_size > 1).
  mamba_layer(parameter_store& store, int number, const gpt_model_config& config, int tp_size,
              group* cp = nullptr);
  /// After store.allocate(): the mixer's own draws (A_log, dt_bias, conv1d).
  void initialize(parameter_store& store, std::uint64_t seed, int tp_rank) const {
    mixer_.initialize(store, seed, tp_rank);
  }
  /// y[seq * batch, hidden] from x (this rank's rows / tp with sequence parallelism; seq is this
  /// rank's positions under context parallelism); keeps what the backward needs. Dropout only
  /// when training; step selects the dropout mask.
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
               tensor::tensor_view y, int seq, int batch, bool training, std::uint64_t step);
  /// dx from dy and the forward input x (dx may alias dy); accumulates weight gradients.
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view x,
                tensor::const_tensor_view dy, tensor::tensor_view dx);
  void release();
  /// The state the backward reads from the last forward, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) {
    s.carry(rows_, placement_, hidden_p_, stream_, normed_);
    norm_.carry(s);
    mixer_.carry(s);
  }

 private:
  int number_, hidden_, rows_ = 0;  // rows_: this rank's (a sequence shard's under SP)
  bool sequence_parallel_;
  std::uint64_t seed_;
  tensor::dtype type_;
  sequence_shard shard_;
  row_placement placement_;
  float hidden_dropout_, hidden_p_ = 0;
  std::uint64_t stream_ = 0;
  norm norm_;
  mamba_mixer mixer_;
  tensor::tensor normed_, branch_, dnormed_;  // saved norm output; scratch
};

}  // namespace mactor::model
