// One pre-norm transformer layer as Megatron-Core's local spec builds it:
// x1 = x + dropout(attention(input_layernorm(x)) + proj_bias)
// y  = x1 + dropout(mlp(pre_mlp_layernorm(x1)) + fc2_bias), all rows in [seq, batch] order;
// in a MoE layer (gpt_model_config::moe) the MLP is a moe_layer, without bias.
// In a hybrid Mamba model (gpt_model_config::hybrid_layers) a '*' layer has only the attention
// half and a '-' layer only the MLP half (Megatron's mamba_stack_spec: the other half is an
// IdentityOp), their norms named as Transformer Engine fuses them into the following linear.
// With sequence parallelism x, x1 and y (and the norms and residual dropouts) are this rank's
// [seq / tp, batch, hidden] shard; a dropout mask element is that of the same element at tp = 1.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "model/activation_stash.hpp"
#include "model/mlp.hpp"
#include "model/moe_layer.hpp"
#include "model/norm.hpp"
#include "model/multi_latent_attention.hpp"
#include "model/self_attention.hpp"

namespace mactor::model {

class transformer_layer {
 public:
  /// Registers decoder.layers.<number>.{input_layernorm, self_attention, pre_mlp_layernorm, mlp}.
  /// cp: the context-parallel group (needed when config.context_parallel_size > 1).
  /// name: the parameters' prefix in place of decoder.layers.<number> (an MTP depth's
  /// mtp.layers.<k>.transformer_layer); spec: the decoder layer whose spec (dense or MoE,
  /// attention window, RoPE) it copies (-1: number itself); number still picks the dropout masks.
  transformer_layer(parameter_store& store, int number, const gpt_model_config& config,
                    int tp_rank, int tp_size, group* cp = nullptr, moe_groups moe = {},
                    const std::string& name = {}, int spec = -1);
  /// y[seq * batch, hidden] from x ([seq / tp * batch, hidden] shards with sequence
  /// parallelism; seq is this rank's positions under context parallelism); keeps what the backward needs. Dropout only when training; step selects the
  /// dropout masks (one value per forward).
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
               tensor::tensor_view y, int seq, int batch, bool training, std::uint64_t step);
  /// dx from dy and the forward input x (dx may alias dy); accumulates weight gradients.
  /// With selective layernorm recomputation the norms' outputs were not kept: they are
  /// recomputed here from x and the kept attention residual.
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view x,
                tensor::const_tensor_view dy, tensor::tensor_view dx);
  /// The MoE layer in place of the MLP, or null in a dense layer.
  moe_layer* moe() { return moe_ ? &*moe_ : nullptr; }
  const moe_layer* moe() const { return moe_ ? &*moe_ : nullptr; }
  /// Frees every activation the layer keeps and its scratch: a checkpointed layer after its
  /// forward (the backward reruns the forward first) and after its backward.
  void release();
  /// The state the backward reads from the last forward, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s);
  /// The micro-batch's document mask for the attention (null: causal); see micro_batch.
  void set_document_starts(const std::int32_t* starts);

 private:
  int number_, hidden_, rows_ = 0, local_rows_ = 0;
  bool sequence_parallel_;
  bool recompute_norms_;  // selective layernorm recomputation
  // Selective MoE recomputation: the MoE layer frees its activations after the forward and
  // reruns it (same routing, noise and numbers) at the start of its backward.
  bool recompute_moe_;
  int moe_seq_ = 0, moe_batch_ = 0;
  std::uint64_t moe_stream_ = 0;
  std::uint64_t step_ = 0;  // the forward's dropout step
  sequence_shard shard_;
  row_placement placement_;  // the rows' places in the one-rank [seq * batch, hidden] (dropout)
  std::uint64_t seed_;
  tensor::dtype type_;  // the model's dtype (the residual stream's may be fp32)
  float attention_dropout_, hidden_dropout_;
  float hidden_p_ = 0;
  std::uint64_t attention_stream_ = 0, mlp_stream_ = 0;
  bool has_attention_, has_mlp_;  // both but in a hybrid model's '*' and '-' layers
  std::optional<norm> input_layernorm_;
  // Megatron's self_attention module: SelfAttention, or MLASelfAttention under
  // --multi-latent-attention.
  std::optional<self_attention> self_attention_;
  std::optional<multi_latent_attention> mla_;
  std::optional<norm> pre_mlp_layernorm_;
  std::optional<mlp> mlp_;        // a dense layer
  std::optional<moe_layer> moe_;  // a MoE layer
  tensor::tensor ln1_, x1_, ln2_;      // saved activations
  tensor::tensor branch_, dx1_, dln_;  // scratch: a branch output or its gradient

  void attention_forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                         tensor::tensor_view out, int seq, int batch, float dropout,
                         std::uint64_t stream);
  void attention_backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                          tensor::const_tensor_view x, tensor::tensor_view dx);
  tensor::const_tensor_view attention_bias(const parameter_store& store) const;
  void mlp_forward(const parameter_store& store, group& tp, tensor::const_tensor_view x1,
                   tensor::tensor_view y, int seq, int batch, bool training);
  /// dx1 = dy + the MLP half's input gradient, from the half's input x1.
  void mlp_backward(parameter_store& store, group& tp, tensor::const_tensor_view x1,
                    tensor::const_tensor_view dy, tensor::tensor_view dx1);
};

}  // namespace mactor::model
