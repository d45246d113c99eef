// Byte counts per token of each memory-bound kernel of a layer's forward (see the header).
#include "simulate/elementwise_traffic.hpp"

#include "simulate/layer_kinds.hpp"

namespace mactor::simulate {

bool attention_scores_materialized(const config::megatron_args& a) {
  const auto& backend = a.network_size.attention_backend;
  return backend == "local" || backend == "unfused";
}

elementwise_bytes layer_elementwise_bytes(const config::megatron_args& a, layer_blocks blocks) {
  const auto& n = a.network_size;
  const auto& d = a.distributed;
  const double act = activation_element_bytes(a);
  const double tp = static_cast<double>(d.tensor_model_parallel_size), cp = static_cast<double>(d.context_parallel_size);
  const double tokens = static_cast<double>(a.training.micro_batch_size.value_or(1)) * static_cast<double>(*a.data.seq_length) / cp;
  // Norms and residual adds run on the whole hidden state on every tensor-parallel rank, or on
  // its sequence shard with sequence parallelism.
  const double hidden = static_cast<double>(*n.hidden_size) / (a.training.sequence_parallel ? tp : 1);
  const double dropout_mask = a.regularization.hidden_dropout > 0 ? 1 : 0;
  // A norm reads and writes the hidden state; a bias-dropout-add reads the branch's output and
  // the residual and writes their sum (and a byte of dropout mask per element).
  const double per_block = (2 * act + 3 * act + dropout_mask) * hidden;
  const int blocks_with_residual = (blocks.mixer ? 1 : 0) + (blocks.mlp ? 1 : 0);

  elementwise_bytes out;
  out.around_matmuls = tokens * blocks_with_residual * per_block;
  if (blocks.mlp) {
    // The activation function reads the fc1 output (both halves when gated) and writes its result.
    double width = static_cast<double>(n.ffn_hidden_size.value_or(4 * *n.hidden_size)) / tp;
    if (blocks.moe) {
      const auto& m = a.moe;
      const double expert_tp = static_cast<double>(m.expert_tensor_parallel_size.value_or(d.tensor_model_parallel_size));
      const double routed = static_cast<double>(m.moe_router_topk) *
                            static_cast<double>(m.moe_ffn_hidden_size.value_or(n.ffn_hidden_size.value_or(4 * *n.hidden_size)));
      width = routed / expert_tp + static_cast<double>(m.moe_shared_expert_intermediate_size.value_or(0)) / tp;
    }
    out.around_matmuls += tokens * act * (n.swiglu ? 3 : 2) * width;
  }
  if (blocks.attention && attention_scores_materialized(a)) {
    // Each query row of scores spans the whole sequence: written by Q K^T, read and written by the
    // softmax, by the dropout (with its mask), read by the product with V.
    const double heads = static_cast<double>(*n.num_attention_heads) / tp;
    const double keys = static_cast<double>(*a.data.seq_length);
    const double passes = 4 * act + (a.regularization.attention_dropout > 0 ? 2 * act + 1 : 0);
    out.attention_scores = tokens * heads * keys * passes;
  }
  return out;
}

}  // namespace mactor::simulate
