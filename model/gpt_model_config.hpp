// The plain description of a GPT model that model/ builds: Megatron's argument names where one
// exists (the integrator maps parsed flags onto it), plus this rank's tensor-parallel position.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/context_parallel.hpp"
#include "model/recompute.hpp"
#include "model/fp8_recipe.hpp"
#include "model/moe_config.hpp"
#include "tensor/dtype.hpp"

namespace mactor::model {

enum class normalization_kind { layer_norm, rms_norm };             // --normalization
enum class position_embedding_kind { learned_absolute, rope, none };  // --position-embedding-type
enum class softmax_kind { vanilla, off_by_one, learnable };         // --softmax-type

/// Megatron's per-layer selector (moe_freq_type / no_rope_freq_type): an int N or a list with
/// one 0/1 entry per layer. Unset (every == 0, list empty): the flag was not given.
struct layer_frequency {
  int every = 0;
  std::vector<int> list;
  bool given() const { return every > 0 || !list.empty(); }
};

/// Multi-latent attention (DeepSeek-V2/V3): the queries and keys/values come from low-rank
/// latents; a shared RoPE key part (qk_pos_emb_head_dim) joins each head's non-rotated part.
struct mla_settings {
  bool enabled = false;         // --multi-latent-attention
  int q_lora_rank = 0;          // --q-lora-rank; 0: no query latent (linear_q_proj)
  int kv_lora_rank = 32;        // --kv-lora-rank
  int qk_head_dim = 128;        // --qk-head-dim
  int qk_pos_emb_head_dim = 64; // --qk-pos-emb-head-dim
  int v_head_dim = 128;         // --v-head-dim
  bool yarn = true;             // --rope-type yarn (MLA's default) or rope
  double rotary_scaling_factor = 1.0;  // --rotary-scaling-factor
  double mscale = 1.0;                 // --mscale
  double mscale_all_dim = 0.0;         // --mscale-all-dim
  int original_max_position_embeddings = 4096;  // MLATransformerConfig defaults (no flags)
  double beta_fast = 32, beta_slow = 1;
};

/// The Mamba-2 mixers of a hybrid model (--mamba-state-dim, --mamba-head-dim, --mamba-num-groups,
/// --mamba-num-heads; 0 heads: 2 * hidden_size / head_dim, as Megatron's expand of 2 gives).
struct mamba_settings {
  int state_dim = 128;
  int head_dim = 64;
  int num_groups = 8;
  int num_heads = 0;
};

struct gpt_model_config {
  int num_layers = 2;
  int hidden_size = 64;
  int ffn_hidden_size = 256;
  int num_attention_heads = 4;
  int num_query_groups = 0;  // 0: one group per head (no GQA); --num-query-groups
  int kv_channels = 0;       // 0: hidden_size / num_attention_heads
  int seq_length = 128;
  int max_position_embeddings = 128;
  int padded_vocab_size = 1024;
  normalization_kind normalization = normalization_kind::layer_norm;
  float norm_epsilon = 1e-5f;
  bool apply_layernorm_1p = false;  // zero-centered gamma: weight stored as w, used as 1 + w
  position_embedding_kind position_embedding_type = position_embedding_kind::learned_absolute;
  double rotary_base = 10000.0;
  float rotary_percent = 1.0f;
  bool rotary_interleaved = false;                   // --rotary-interleaved: pairs (x0, x1), (x2, x3)...
  double rotary_seq_len_interpolation_factor = 1.0;  // RoPE positions are divided by it
  bool use_rope_scaling = false;                     // Llama 3.1 scaling of the RoPE frequencies
  double rope_scaling_factor = 8.0;
  /// --no-rope-freq: N skips RoPE in layers N, 2N, ... (1-based); a list's 1s mark the layers
  /// that skip it.
  layer_frequency no_rope_freq;
  /// --window-size (left, right): sliding-window attention, query i sees keys i - left .. i
  /// (right must be 0: the model is causal; left -1 is an unbounded window). Empty: full.
  std::vector<std::int64_t> window_size;
  /// --window-attn-skip-freq: N gives layers N, 2N, ... (1-based) full attention and the others
  /// the window; a list's 1s mark the window layers. Unset: every layer has the window.
  layer_frequency window_attn_skip_freq;
  /// --softmax-type: off_by_one adds exp(0) to each attention softmax's denominator; learnable
  /// adds exp(softmax_offset[head]), a parameter per attention head (zeros at init).
  softmax_kind softmax_type = softmax_kind::vanilla;
  bool swiglu = false;
  bool squared_relu = false;  // --squared-relu: relu(x)^2 instead of GeLU (not with swiglu)
  /// --use-fused-weighted-squared-relu: TEGroupedMLP's experts (--moe-grouped-gemm, not the legacy
  /// GroupedMLP) compute relu(x)^2 * prob in one fused step, rounded to 16 bits once.
  bool fused_weighted_squared_relu = false;
  /// --quick-geglu: a gated unit with quick GeLU, x * sigmoid(1.702 x), as the gate's activation
  /// (fc1 is [gate; linear] as with swiglu; not with swiglu).
  bool quick_geglu = false;
  /// What Megatron-Core's unfused GLU adds (the integrator sets them only where Megatron applies
  /// them: a gated unit computed unfused): --activation-func-clamp-value c clamps the gate to at
  /// most c and the linear half to [-c, c]; --glu-linear-offset is added to the linear half.
  std::optional<float> activation_func_clamp_value;
  float glu_linear_offset = 0.0f;
  /// GeLU by the tanh formula: Megatron uses it under --openai-gelu and in its fused bias-gelu
  /// (bias_gelu_fusion, on by default when add_bias_linear); otherwise torch's exact erf GeLU.
  bool gelu_tanh_approximation = false;
  bool add_bias_linear = true;
  bool add_qkv_bias = false;  // qkv bias even when add_bias_linear is off
  /// --qk-layernorm: a norm (the model's --normalization, over kv_channels) on each query head
  /// and one on each key head, after the qkv projection and before RoPE.
  bool qk_layernorm = false;
  /// --qk-l2-norm (Llama 4): Megatron's L2Norm in those slots instead, parameter-free:
  /// x * rsqrt(mean(x^2) + norm_epsilon) over each head's kv_channels, in fp32, rounded once.
  bool qk_l2_norm = false;
  float attention_dropout = 0.1f;
  float hidden_dropout = 0.1f;
  bool untie_embeddings_and_output_weights = false;
  /// Whether the last stage holds a copy of the word-embedding table, summed with the first
  /// stage's (Megatron's shared embedding): tied to the output layer, or read by the
  /// multi-token-prediction depths (GPTModel.shared_embedding_or_output_weight).
  bool shares_word_embedding() const { return !untie_embeddings_and_output_weights || mtp_num_layers > 0; }
  float init_method_std = 0.02f;
  /// --embedding-init-method-std (unset: init_method_std): the word and position embeddings'
  /// normal std; when set, the embeddings also skip weight decay, as Megatron's optimizer does.
  std::optional<float> embedding_init_method_std;
  /// --init-method-xavier-uniform: Megatron's init_method and output_layer_init_method draw
  /// uniform(-b, b), b = sqrt(6 / (fan_in + fan_out)) of the full (tp = 1) weight.
  bool init_method_xavier_uniform = false;
  /// --no-initialization: the weights' init_method draws are skipped (zero until a checkpoint
  /// fills them; parameter_store::set_skip_weight_init).
  bool skip_weight_init = false;
  /// Megatron FSDP's --init-model-with-meta-device with sharded parameters: a chunk lays its
  /// parameters out with no memory, and materialize_shard() later holds and draws only its
  /// data-parallel shard (model/parameter.hpp).
  bool init_model_with_meta_device = false;
  std::uint64_t seed = 1234;
  int tensor_model_parallel_size = 1;
  int tensor_model_parallel_rank = 0;
  /// --context-parallel-size and this rank's place in its group: each rank holds 2 of the
  /// sequence's 2 * cp chunks (model/context_parallel.hpp).
  int context_parallel_size = 1;
  int context_parallel_rank = 0;
  /// --cp-comm-type: one entry for every layer, or one per layer (layer = the global number).
  std::vector<cp_comm_kind> cp_comm_types{cp_comm_kind::p2p};
  cp_comm_kind cp_comm(int layer) const {
    return cp_comm_types.size() == 1 ? cp_comm_types[0] : cp_comm_types.at(std::size_t(layer));
  }
  sequence_shard shard() const { return {seq_length, context_parallel_size, context_parallel_rank}; }
  /// Megatron's --sequence-parallel: outside the tensor-parallel regions (norms, dropouts,
  /// residuals) each rank holds seq_length / tp positions of the [seq, batch, hidden] activations.
  bool sequence_parallel = false;
  /// The dtype of the parameters and the activations (Megatron's params_dtype): fp32, bf16 or
  /// fp16 (--bf16 / --fp16), fp64 for gradient checks.
  tensor::dtype params_dtype = tensor::dtype::float32;
  /// Megatron's --fp32-residual-connection: with a 16-bit model, the residual stream (the
  /// embedding's output, each layer's input and output, their gradients and the pipeline
  /// transfers) is fp32; norms read it and write the model's dtype, and each branch's bf16 output
  /// is added to it in fp32.
  bool fp32_residual_connection = false;
  tensor::dtype residual_dtype() const {
    return fp32_residual_connection ? tensor::dtype::float32 : params_dtype;
  }
  /// What the layers keep for their backward and what they recompute (--recompute-*).
  recompute_config recompute;
  /// --multi-latent-attention (Megatron-Core's MLASelfAttention in place of SelfAttention).
  mla_settings mla;
  /// fp8 GEMMs in the transformer layers' linears (--fp8-format and the recipe flags); the
  /// embedding and the output layer stay in params_dtype, as in Megatron.
  fp8_settings fp8;
  /// Mixture-of-experts layers in place of the MLP (--num-experts, --moe-*); none by default.
  moe_settings moe;
  /// --mtp-num-layers: Megatron-Core's multi-token prediction depths on the last stage (0: none),
  /// and --mtp-loss-scaling-factor: their mean loss's weight in the backward.
  int mtp_num_layers = 0;
  float mtp_loss_scaling_factor = 0.1f;
  /// A hybrid Mamba model (pretrain_mamba with Megatron's mamba_stack_spec): each layer's kind,
  /// 'M' a Mamba layer, '*' attention only, '-' an MLP only (config::allocate_hybrid_layers).
  /// Empty: a GPT, every layer with attention and an MLP.
  std::string hybrid_layers;
  mamba_settings mamba;
  /// --is-hybrid-model: Megatron's output_layer_init_method draws with std / sqrt(num_layers)
  /// instead of std / sqrt(2 num_layers).
  bool is_hybrid_model = false;
  /// Megatron's output_layer_init_method std (the attention projection's and fc2's).
  double output_layer_init_std() const;
  bool hybrid() const { return !hybrid_layers.empty(); }
  /// Global layer `layer`'s kind in a hybrid model ('M', '*' or '-'); 0 in a GPT.
  char hybrid_layer_kind(int layer) const {
    return hybrid() ? hybrid_layers[std::size_t(layer)] : char(0);
  }
  /// Megatron DDP's gradient buffer (main_grad) for a 16-bit model: fp32 with
  /// grad_reduce_in_fp32 (--accumulate-allreduce-grads-in-fp32, which --bf16 turns on unless
  /// --grad-reduce-in-bf16), else bf16: the backward accumulates and the data-parallel group
  /// reduces in it.
  tensor::dtype grad_buffer_dtype = tensor::dtype::float32;
  /// The dtype the backward accumulates weight gradients in (its gradient-accumulation fusion
  /// adds each GEMM's weight gradient into the buffer): grad_buffer_dtype, fp64 for gradient checks.
  tensor::dtype grads_dtype() const {
    return params_dtype == tensor::dtype::float64 ? tensor::dtype::float64 : grad_buffer_dtype;
  }

  bool gated_linear_unit() const { return swiglu || quick_geglu; }
  int query_groups() const { return num_query_groups > 0 ? num_query_groups : num_attention_heads; }
  int head_dim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads; }
  int rotary_dim() const { return int(head_dim() * rotary_percent); }
  /// Whether global layer `layer` (0-based) rotates its queries and keys.
  bool layer_applies_rope(int layer) const;
  /// The sliding window of global layer `layer` (0-based): keys i - window .. i; -1: all keys.
  int layer_attention_window(int layer) const;
};

/// Every rule the config breaks, each naming the fields and a fix; empty when usable.
std::vector<std::string> validate(const gpt_model_config& config);

}  // namespace mactor::model
