// Megatron-Core's SelfAttention (local spec): fused QKV column-parallel projection in the
// grouped layout (per query group: its query heads, one key head, one value head), optional
// RoPE on queries and keys (unless --no-rope-freq skips this layer), causal softmax attention
// (a sliding window under --window-size, a sink logit under --softmax-type) with dropout,
// row-parallel output projection. Under context parallelism (cp given) the queries are this
// rank's chunks; --cp-comm-type p2p runs ring attention (model/ring_attention.hpp), a2a Ulysses
// attention (model/ulysses_attention.hpp), a2a+p2p both over cp's two hierarchical levels
// (model/hierarchical_cp_attention.hpp), and allgather all-gathers the whole sequence's keys
// and values over cp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/attention.hpp"
#include "model/activation_stash.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/l2_norm.hpp"
#include "model/norm.hpp"
#include "model/hierarchical_cp_attention.hpp"
#include "model/ring_attention.hpp"
#include "model/ulysses_attention.hpp"
#include "model/tensor_parallel_linear.hpp"

namespace mactor::model {

class self_attention {
 public:
  /// Registers name.linear_qkv.*, name.linear_proj.* and, with --softmax-type learnable,
  /// name.core_attention.softmax_offset ([num_attention_heads], split by heads over tp).
  /// layer: the global (0-based) layer number, which picks the per-layer RoPE and window.
  /// cp: the context-parallel group (needed when config.context_parallel_size > 1).
  self_attention(parameter_store& store, const std::string& name,
                 const gpt_model_config& config, int layer, int tp_rank, int tp_size,
                 group* cp = nullptr);
  /// out[rows, hidden] = all-reduced projection of attention(x), without linear_proj's bias
  /// (returned by proj_bias() for bias-dropout-add). x: [seq, batch, hidden] input-norm output
  /// (seq: this rank's positions under context parallelism).
  /// With sequence parallelism x and out are this rank's [seq / tp, batch, hidden] shards.
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
               tensor::tensor_view out, int seq, int batch, float attention_dropout,
               std::uint64_t dropout_stream);
  tensor::const_tensor_view proj_bias(const parameter_store& store) const { return linear_proj_.bias(store); }
  /// dout: gradient of the biased projection output; dx[rows, hidden] = all-reduced input grad
  /// (both shards with sequence parallelism, dx reduce-scattered).
  /// With selective core_attn recomputation the forward keeps q, k, v and the context but not
  /// the softmax probabilities, which the backward recomputes from q and k.
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                tensor::const_tensor_view x, tensor::tensor_view dx);
  /// Frees every saved activation and scratch buffer (full recomputation reruns the forward).
  void release();
  /// The state the backward reads from the last forward, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s);
  /// --reset-attention-mask: [batch, seq] document starts for the next forward and backward
  /// (null: causal). A layer with a sliding window keeps its window alone, as Megatron's softmax
  /// replaces the given mask with the window's.
  void set_document_starts(const std::int32_t* starts) { dims_.document_start = dims_.window < 0 ? starts : nullptr; }

 private:
  // The learnable sink logits' parameter id (-1: none), registered first as Megatron's
  // core_attention comes before the projections.
  int softmax_offset_;
  column_parallel_linear linear_qkv_;
  row_parallel_linear linear_proj_;
  std::optional<norm> q_layernorm_, k_layernorm_;  // --qk-layernorm
  std::optional<l2_norm> q_l2_norm_, k_l2_norm_;   // --qk-l2-norm (in place of the above)
  kernels::attention_dims dims_;
  bool rope_;
  bool rope_interleaved_;
  bool recompute_core_;  // selective recomputation of the attention core
  int rot_dim_;
  tensor::tensor zero_sink_; // off-by-one: a sink logit of 0 for each head here
  double scale_;
  float dropout_ = 0;
  std::uint64_t stream_ = 0;
  sequence_shard shard_;
  group* cp_;
  std::optional<ring_attention> ring_;    // --cp-comm-type p2p
  tensor::tensor lse_;                    // ring attention: each query row's log-sum-exp
  std::optional<ulysses_attention> ulysses_;  // --cp-comm-type a2a
  std::optional<hierarchical_cp_attention> hierarchical_;  // --cp-comm-type a2a+p2p
  tensor::tensor cos_, sin_;              // [local sequence, rot_dim / 2]: this rank's positions
  tensor::tensor qkv_, probs_, context_;  // saved activations of the last forward
  tensor::tensor kv_;                     // context parallelism: the whole sequence's qkv
  tensor::tensor q_in_, k_in_;            // --qk-layernorm: the heads before their norms
  tensor::tensor q_out_, k_out_;          // --qk-layernorm scratch: normed heads, their gradients

  tensor::const_tensor_view sink(const parameter_store& store) const;
  /// Under context parallelism: attention passes blocks between the ranks (p2p, a2a, a2a+p2p),
  /// keeping no probabilities of its own, rather than all-gathering the keys and values.
  bool exchanges_blocks() const { return ring_ || ulysses_ || hierarchical_; }
  void core_forward(const parameter_store& store, tensor::tensor_view context,
                    tensor::tensor_view probs);
  /// --qk-layernorm (or --qk-l2-norm) on the query and key heads of qkv, in place (keeps their inputs).
  void qk_norm_forward(const parameter_store& store, tensor::tensor_view qkv, int rows);
  /// The norms' backward on the query and key parts of dqkv, in place.
  void qk_norm_backward(parameter_store& store, tensor::tensor_view dqkv, int rows);
  /// The query rows' dims: the whole sequence, or this rank's chunks against all keys.
  void set_dims(int seq, int batch);
  /// dqkv = the core's gradient: under context parallelism the queries' part from here and the
  /// keys' and values' summed over the ranks.
  void core_backward(parameter_store& store, tensor::tensor_view dqkv);
  tensor::tensor dqkv_, dcontext_, dkv_, dkv_local_;  // backward scratch
};

}  // namespace mactor::model
