// Consistency rules for gpt_model_config, reported all at once.
#include "model/gpt_model_config.hpp"

#include <cmath>

namespace mactor::model {

namespace {

// Megatron's layer selectors (1-based layer numbers): whether an int N marks layer l, l % N == 0.
bool marked_by_every(const layer_frequency& f, int layer) { return (layer + 1) % f.every == 0; }

void check_frequency(std::vector<std::string>& errors, const layer_frequency& f, int layers,
                     const std::string& field) {
  if (f.every < 0) errors.push_back(field + " must be a positive layer count");
  if (!f.list.empty() && int(f.list.size()) != layers)
    errors.push_back(field + " lists " + std::to_string(f.list.size()) +
                     " layers; it needs one entry per layer (num_layers=" + std::to_string(layers) + ")");
}

}  // namespace

bool gpt_model_config::layer_applies_rope(int layer) const {
  if (position_embedding_type != position_embedding_kind::rope) return false;
  if (no_rope_freq.every > 0) return !marked_by_every(no_rope_freq, layer);
  if (!no_rope_freq.list.empty()) return no_rope_freq.list.at(std::size_t(layer)) == 0;
  return true;
}

int gpt_model_config::layer_attention_window(int layer) const {
  if (window_size.empty()) return -1;
  bool windowed = true;  // Megatron's is_layer_window_attention
  if (window_attn_skip_freq.every > 0) windowed = !marked_by_every(window_attn_skip_freq, layer);
  else if (!window_attn_skip_freq.list.empty())
    windowed = window_attn_skip_freq.list.at(std::size_t(layer)) != 0;
  return windowed ? int(window_size[0]) : -1;
}

namespace {

// What the MoE layer does not build yet is refused here; Megatron's own rules are in config/.
void check_moe(std::vector<std::string>& errors, const gpt_model_config& c) {
  auto need = [&](bool ok, std::string message) {
    if (!ok) errors.push_back(std::move(message));
  };
  const auto& m = c.moe;
  need(m.router_topk >= 1 && m.router_topk <= m.num_experts,
       "moe.router_topk=" + std::to_string(m.router_topk) + " must lie in [1, num_experts=" +
           std::to_string(m.num_experts) + "]");
  need(m.expert_tensor_parallel_size >= 1 && m.expert_tensor_parallel_rank >= 0 &&
           m.expert_tensor_parallel_rank < m.expert_tensor_parallel_size,
       "moe.expert_tensor_parallel_size=" + std::to_string(m.expert_tensor_parallel_size) +
           " must be at least 1, with 0 <= expert_tensor_parallel_rank < it");
  need(c.tensor_model_parallel_size == 1 || c.sequence_parallel,
       "MoE layers with tensor_model_parallel_size > 1 run on sequence-parallel shards; set sequence_parallel "
       "(--sequence-parallel)");
  const int ffn = m.ffn_hidden_size > 0 ? m.ffn_hidden_size : c.ffn_hidden_size;
  need(ffn % m.expert_tensor_parallel_size == 0,
       "the experts' ffn_hidden_size " + std::to_string(ffn) + " must divide over expert_tensor_parallel_size=" +
           std::to_string(m.expert_tensor_parallel_size));
  need(m.expert_parallel_size >= 1 && m.num_experts % m.expert_parallel_size == 0 &&
           m.expert_parallel_rank >= 0 && m.expert_parallel_rank < m.expert_parallel_size,
       "moe.num_experts=" + std::to_string(m.num_experts) + " must divide into expert_parallel_size=" +
           std::to_string(m.expert_parallel_size) + " equal blocks, with 0 <= expert_parallel_rank < that size");
  need(!c.add_bias_linear, "MoE experts with biases are not implemented yet; add --disable-bias-linear");
  if (m.router_group_topk > 0)
    need(m.router_num_groups > 0 && m.num_experts % m.router_num_groups == 0 &&
             m.router_group_topk <= m.router_num_groups && m.router_topk / m.router_group_topk >= 1 &&
             m.router_topk / m.router_group_topk <= m.num_experts / m.router_num_groups,
         "moe.router_group_topk needs router_num_groups dividing num_experts, group_topk <= num_groups and "
         "1 <= topk / group_topk <= experts per group");
  if (!m.layer_freq_list.empty())
    need(int(m.layer_freq_list.size()) == c.num_layers,
         "moe.layer_freq has " + std::to_string(m.layer_freq_list.size()) + " entries; it needs one per layer (" +
             std::to_string(c.num_layers) + ")");
}

// A hybrid Mamba model as built: one kind per layer, the mixer's shape, and only the features
// Megatron's mamba_stack_spec layers have.
void check_hybrid(std::vector<std::string>& errors, const gpt_model_config& c) {
  const auto require = [&](bool ok, std::string message) {
    if (!ok) errors.push_back(std::move(message));
  };
  require(int(c.hybrid_layers.size()) == c.num_layers,
          "hybrid_layers has " + std::to_string(c.hybrid_layers.size()) + " kinds for " +
              std::to_string(c.num_layers) + " layers");
  for (char k : c.hybrid_layers)
    require(k == 'M' || k == '*' || k == '-', std::string("hybrid layer kind '") + k + "' is not one of M, *, -");
  const auto& m = c.mamba;
  const int heads = m.num_heads > 0 ? m.num_heads : (m.head_dim > 0 ? 2 * c.hidden_size / m.head_dim : 0);
  require(m.state_dim > 0 && m.head_dim > 0 && m.num_groups > 0, "mamba state_dim, head_dim and num_groups must be positive");
  require(heads > 0 && m.num_groups > 0 && heads % m.num_groups == 0,
          "the Mamba heads (" + std::to_string(heads) + ") must be a positive multiple of mamba.num_groups (" +
              std::to_string(m.num_groups) + ")");
  const int tp = c.tensor_model_parallel_size;
  require(tp > 0 && heads % tp == 0 && m.num_groups % tp == 0,
          "the Mamba heads and mamba.num_groups must be multiples of tensor_model_parallel_size");
  const int cp = c.context_parallel_size, local_groups = m.num_groups / tp;
  require(cp > 0 && (heads / tp) % cp == 0 &&
              (local_groups < cp ? cp % local_groups == 0 : local_groups % cp == 0),
          "the Mamba heads per tensor-parallel rank must divide by context_parallel_size, and its groups divide it "
          "or divide by it");
  require(!c.moe.enabled(), "a hybrid Mamba model has no MoE layers");
  require(c.mtp_num_layers == 0, "a hybrid Mamba model has no multi-token prediction");
  require(!c.mla.enabled && !c.qk_layernorm && !c.qk_l2_norm && !c.fp32_residual_connection,
          "a hybrid Mamba model's layers have no MLA, qk-layernorm, qk-l2-norm or fp32 residual");
}

}  // namespace

double gpt_model_config::output_layer_init_std() const {
  return init_method_std / std::sqrt((is_hybrid_model ? 1.0 : 2.0) * num_layers);
}

std::vector<std::string> validate(const gpt_model_config& c) {
  std::vector<std::string> errors;
  auto need = [&](bool ok, std::string message) {
    if (!ok) errors.push_back(std::move(message));
  };
  const int tp = c.tensor_model_parallel_size;
  need(c.num_layers > 0 && c.hidden_size > 0 && c.ffn_hidden_size > 0 &&
           c.num_attention_heads > 0 && c.seq_length > 0 && c.padded_vocab_size > 0,
       "num_layers, hidden_size, ffn_hidden_size, num_attention_heads, seq_length and "
       "padded_vocab_size must all be positive");
  need(tp > 0 && c.tensor_model_parallel_rank >= 0 && c.tensor_model_parallel_rank < tp,
       "tensor_model_parallel_rank=" + std::to_string(c.tensor_model_parallel_rank) +
           " must lie in [0, tensor_model_parallel_size=" + std::to_string(tp) + ")");
  if (!errors.empty()) return errors;
  need(!(c.qk_l2_norm && c.mla.enabled), "qk_l2_norm is not supported with MLA");
  need(c.num_attention_heads % c.query_groups() == 0,
       "num_attention_heads=" + std::to_string(c.num_attention_heads) +
           " is not divisible by num_query_groups=" + std::to_string(c.query_groups()));
  need(c.query_groups() % tp == 0, "num_query_groups=" + std::to_string(c.query_groups()) +
                                       " is not divisible by tensor_model_parallel_size=" +
                                       std::to_string(tp) + "; each rank must hold whole groups");
  need(c.ffn_hidden_size % tp == 0, "ffn_hidden_size=" + std::to_string(c.ffn_hidden_size) +
                                        " is not divisible by tensor_model_parallel_size=" +
                                        std::to_string(tp));
  need(c.padded_vocab_size % tp == 0,
       "padded_vocab_size=" + std::to_string(c.padded_vocab_size) +
           " is not divisible by tensor_model_parallel_size=" + std::to_string(tp) +
           "; pad the vocabulary (--make-vocab-size-divisible-by)");
  need(c.kv_channels > 0 || c.hidden_size % c.num_attention_heads == 0,
       "hidden_size=" + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads=" +
           std::to_string(c.num_attention_heads) + "; set kv_channels explicitly");
  if (c.position_embedding_type == position_embedding_kind::learned_absolute)
    need(c.seq_length <= c.max_position_embeddings,
         "seq_length=" + std::to_string(c.seq_length) + " exceeds max_position_embeddings=" +
             std::to_string(c.max_position_embeddings));
  if (c.position_embedding_type == position_embedding_kind::rope)
    need(c.rotary_dim() >= 2 && c.rotary_dim() % 2 == 0,
         "rotary_percent=" + std::to_string(c.rotary_percent) + " of kv_channels=" +
             std::to_string(c.head_dim()) + " must give an even rotary dimension of at least 2");
  const int cp = c.context_parallel_size;
  need(cp > 0 && c.context_parallel_rank >= 0 && c.context_parallel_rank < cp,
       "context_parallel_rank=" + std::to_string(c.context_parallel_rank) +
           " must lie in [0, context_parallel_size=" + std::to_string(cp) + ")");
  if (cp > 1)
    need(c.seq_length % (2 * cp) == 0,
         "seq_length=" + std::to_string(c.seq_length) + " is not divisible by 2 * context_parallel_size=" +
             std::to_string(2 * cp) + "; each context-parallel rank holds 2 of the sequence's 2 * cp chunks");
  if (c.sequence_parallel && cp > 1)
    need(c.seq_length / cp % tp == 0,
         "seq_length / context_parallel_size=" + std::to_string(c.seq_length / cp) +
             " is not divisible by tensor_model_parallel_size=" + std::to_string(tp) +
             "; with sequence parallelism each rank holds seq_length / cp / tp positions");
  if (c.sequence_parallel) {
    // Megatron's ModelParallelConfig raises for tp <= 1; its sequence split asserts divisibility.
    need(tp > 1, "sequence_parallel needs tensor_model_parallel_size > 1 (got " + std::to_string(tp) +
                     "); turn sequence parallelism off");
    need(c.seq_length % tp == 0, "seq_length=" + std::to_string(c.seq_length) +
                                     " is not divisible by tensor_model_parallel_size=" +
                                     std::to_string(tp) +
                                     "; with sequence parallelism each rank holds seq_length / tp "
                                     "positions");
  }
  need(c.attention_dropout >= 0 && c.attention_dropout < 1 && c.hidden_dropout >= 0 &&
           c.hidden_dropout < 1,
       "attention_dropout and hidden_dropout must lie in [0, 1)");
  need(!(c.swiglu && c.squared_relu), "squared_relu cannot be combined with swiglu; pick one activation");
  need(!(c.quick_geglu && (c.swiglu || c.squared_relu)),
       "quick_geglu cannot be combined with swiglu or squared_relu; pick one activation");
  if (c.fp32_residual_connection)
    need(tensor::is_half_precision(c.params_dtype),
         "fp32_residual_connection needs a 16-bit model (--bf16 or --fp16), as Megatron asserts");
  check_frequency(errors, c.no_rope_freq, c.num_layers, "no_rope_freq");
  check_frequency(errors, c.window_attn_skip_freq, c.num_layers, "window_attn_skip_freq");
  if (c.no_rope_freq.every > 0)
    need(c.num_layers % c.no_rope_freq.every == 0,
         "no_rope_freq=" + std::to_string(c.no_rope_freq.every) + " must divide num_layers=" +
             std::to_string(c.num_layers));
  if (!c.window_size.empty())
    need(c.window_size.size() == 2 && c.window_size[0] >= -1 && c.window_size[1] == 0,
         "window_size must be (left, 0) with left >= 0 (or -1: unbounded); the model is causal");
  need(c.rotary_seq_len_interpolation_factor > 0 && (!c.use_rope_scaling || c.rope_scaling_factor > 0),
       "rotary_seq_len_interpolation_factor and rope_scaling_factor must be positive");
  for (auto& e : validate(c.recompute, tp, c.sequence_parallel)) errors.push_back(std::move(e));
  if (c.moe.enabled()) check_moe(errors, c);
  if (c.mtp_num_layers < 0) errors.push_back("mtp_num_layers=" + std::to_string(c.mtp_num_layers) + " must be >= 0");
  if (c.mtp_num_layers > 0 && c.position_embedding_type == position_embedding_kind::learned_absolute)
    errors.push_back("multi-token prediction needs rope or no position embeddings");
  if (c.hybrid()) check_hybrid(errors, c);
  return errors;
}

}  // namespace mactor::model
