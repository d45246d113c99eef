// Megatron-Core's MLASelfAttention (DeepSeek-V2/V3 multi-latent attention). Per (seq, batch) row:
//   queries: q = linear_q_up_proj(q_layernorm(linear_q_down_proj(x)))  (--q-lora-rank set)
//            q = linear_q_proj(x)                                      (unset)
//   latent:  [c, k_pe] = linear_kv_down_proj(x);  [k_nope, v] = linear_kv_up_proj(kv_layernorm(c))
//   each head: query [q_nope, rope(q_pe)], key [k_nope, rope(k_pe)] (k_pe shared by all heads),
//   value v; causal softmax attention with Megatron's scale mscale^2 / sqrt(qk_head_dim +
//   qk_pos_emb_head_dim); output projection linear_proj (row parallel) from heads * v_head_dim.
// The latent norms exist only with --qk-layernorm, as in Megatron's layer specs. RoPE is MLA's
// (kernels/mla_rope.hpp): plain or YaRN. The down projections are replicated (Megatron's
// duplicated TELinear); the up projections column parallel (heads split over tp).
// The attention core is kernels/attention with one group per head and head_dim the larger of the
// query/key and value widths, the shorter vectors zero-padded (zeros change no score and no
// output channel that is kept).
// Under sequence parallelism the input shard is all-gathered once and every replicated part runs
// on the whole sequence (the same values on every tp rank), so no replicated gradient is partial.
// Under context parallelism (cp given) the rows are this rank's chunks of the sequence, rotated
// at their global positions; the packed keys and values are all-gathered over cp, as
// self_attention does.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/attention.hpp"
#include "model/activation_stash.hpp"
#include "model/fp8_linear.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/norm.hpp"
#include "model/tensor_parallel_linear.hpp"

namespace mactor::model {

class multi_latent_attention {
 public:
  /// Registers name.{linear_q_down_proj | linear_q_proj, linear_q_up_proj, linear_kv_down_proj,
  /// linear_kv_up_proj, linear_proj} (and q_layernorm, kv_layernorm with --qk-layernorm).
  /// layer: the global (0-based) layer number (its attention window).
  /// cp: the context-parallel group (needed when config.context_parallel_size > 1).
  multi_latent_attention(parameter_store& store, const std::string& name,
                         const gpt_model_config& config, int layer, int tp_rank, int tp_size,
                         group* cp = nullptr);
  /// As self_attention::forward.
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
               tensor::tensor_view out, int seq, int batch, float attention_dropout,
               std::uint64_t dropout_stream);
  tensor::const_tensor_view proj_bias(const parameter_store& store) const { return linear_proj_.bias(store); }
  /// As self_attention::backward.
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                tensor::const_tensor_view x, tensor::tensor_view dx);
  void release();
  /// The state the backward reads from the last forward, into the stash or back out
  /// (activation_stash.hpp); under context parallelism the gathered keys and values too.
  void carry(activation_stash& s);
  /// As self_attention's.
  void set_document_starts(const std::int32_t* starts) { dims_.document_start = dims_.window < 0 ? starts : nullptr; }

 private:
  mla_settings m_;
  int hidden_, heads_, q_width_, kv_width_;  // q_width_: qk + pos per head; kv_width_: qk + v
  bool sequence_parallel_, recompute_core_;
  int q_down_ = -1, kv_down_;                      // replicated weights
  // Under fp8, the down projections' GEMMs (TELinear, duplicated): kv_down is one GEMM over
  // its [latent; k_pe] rows, so one scale covers both parts.
  std::unique_ptr<fp8_linear> q_down_fp8_, kv_down_fp8_;
  std::optional<column_parallel_linear> q_proj_;   // q_lora_rank unset
  std::optional<column_parallel_linear> q_up_;     // q_lora_rank set
  column_parallel_linear kv_up_;
  row_parallel_linear linear_proj_;
  std::optional<norm> q_layernorm_, kv_layernorm_;  // --qk-layernorm
  kernels::attention_dims dims_;
  double scale_;
  int rot_dim_;
  float dropout_ = 0;
  std::uint64_t stream_ = 0;
  sequence_shard shard_;
  group* cp_;
  tensor::tensor cos_, sin_;  // [local seq, rot_dim / 2] of this rank's positions, scaled by YaRN's factor
  // Saved activations: the whole-sequence input, latents (and their norms), q, kv, k_pe, the
  // packed core input, probabilities and the value-width context.
  tensor::tensor x_full_, q_lat_, q_lat_n_, kv_lat_, kv_lat_n_, q_, kv_, k_pe_;
  tensor::tensor qkv_, probs_, context_, context_v_;
  tensor::tensor kv_all_, dkv_all_, dkv_mine_;  // context parallelism: the whole sequence's packed rows
  tensor::tensor dx_full_, dq_lat_, dkv_lat_, d_lat_n_, dq_, dkv_, dk_pe_, dqkv_, dcontext_;  // scratch
  tensor::tensor kv_down_out_, dkv_down_, dx_q_;  // fp8 scratch: kv_down's whole output and its gradient, q_down's dx
  void kv_down_forward(const parameter_store& store, tensor::tensor_view lat, tensor::tensor_view k_pe, int n);
  void kv_down_backward(parameter_store& store, tensor::tensor_view dx, int n);
  void q_down_backward(parameter_store& store, tensor::const_tensor_view dq_lat, tensor::tensor_view dx, int n);

  int rows() const { return dims_.seq * dims_.batch; }
  /// Copies q, kv and k_pe into the core's [rows, heads, 3, head_dim] layout, or back (the
  /// gradient: dk_pe summed over the heads).
  void pack(tensor::tensor_view qkv) const;
  void unpack(tensor::const_tensor_view dqkv, tensor::tensor_view dq, tensor::tensor_view dkv,
              tensor::tensor_view dk_pe) const;
  void project_forward(const parameter_store& store, group& tp);
  /// The rope tables of this rank's positions.
  void make_tables(const gpt_model_config& c);
  void set_dims(int seq, int batch);
  void core_forward();
  void core_backward(tensor::tensor_view dqkv);
  void project_backward(parameter_store& store, group& tp);
};

}  // namespace mactor::model
