// Hierarchical (a2a+p2p) context parallelism: the level-0 all-to-alls around ring attention.
#include "model/hierarchical_cp_attention.hpp"

#include <stdexcept>
#include <string>

#include "kernels/dispatch.hpp"
#include "model/activation.hpp"
#include "model/group.hpp"
#include "model/ulysses_attention.hpp"

namespace mactor::model {
namespace {

sequence_shard ring_shard_of(const group& a2a, const group& p2p, const sequence_shard& shard) {
  const int a = a2a.size(), p = p2p.size();
  if (a * p != shard.cp_size || a2a.rank() != shard.cp_rank % a || p2p.rank() != shard.cp_rank / a)
    throw std::invalid_argument(
        "a2a+p2p context parallelism: hierarchical groups of " + std::to_string(a) + " and " + std::to_string(p) +
        " ranks (this rank " + std::to_string(a2a.rank()) + " and " + std::to_string(p2p.rank()) +
        ") do not split context-parallel rank " + std::to_string(shard.cp_rank) + " of " +
        std::to_string(shard.cp_size) + " as --hierarchical-context-parallel-sizes does");
  return {shard.seq_length, p, p2p.rank()};
}

}  // namespace

hierarchical_cp_attention::hierarchical_cp_attention(group& a2a, group& p2p, const sequence_shard& shard, int groups)
    : a2a_(a2a), shard_(shard), ring_shard_(ring_shard_of(a2a, p2p, shard)), ring_(p2p, ring_shard_) {
  if (groups % a2a.size() != 0)
    throw std::invalid_argument("--cp-comm-type a2a+p2p needs the query groups per tensor-parallel rank (" +
                                std::to_string(groups) + ") divisible by the first of "
                                "--hierarchical-context-parallel-sizes (" + std::to_string(a2a.size()) + ")");
}

kernels::attention_dims hierarchical_cp_attention::head_dims(const kernels::attention_dims& local) const {
  return head_shard_dims(local, a2a_.size(), a2a_.rank(), ring_shard_.local_length());
}

void hierarchical_cp_attention::forward(tensor::tensor_view out, tensor::const_tensor_view qkv,
                                        const kernels::attention_dims& dims, double scale, float dropout_p,
                                        std::uint64_t dropout_stream, tensor::const_tensor_view sink) {
  const auto d = head_dims(dims);
  const std::int64_t rows = std::int64_t(d.seq) * d.batch;
  const std::int64_t group_width = std::int64_t(dims.heads / dims.groups + 2) * d.head_dim;
  auto heads_qkv = ensure_activation(qkv_heads_, rows, d.qkv_width(), qkv.type);
  sequence_to_heads(a2a_, shard_, ring_shard_, d.batch, dims.groups, group_width, qkv, heads_qkv);
  auto context = ensure_activation(context_heads_, rows, std::int64_t(d.heads) * d.head_dim, qkv.type);
  auto lse = ensure_activation(lse_, rows, d.heads, kernels::compute_dtype(qkv.type));
  const auto my_sink = sink.data ? elements(sink, std::int64_t(a2a_.rank()) * d.heads, d.heads) : sink;
  ring_.forward(context, lse, heads_qkv, d, scale, dropout_p, dropout_stream, my_sink);
  heads_to_sequence(a2a_, shard_, ring_shard_, d.batch, dims.heads, d.head_dim, context, out);
}

void hierarchical_cp_attention::backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                                         const kernels::attention_dims& dims, double scale, float dropout_p,
                                         std::uint64_t dropout_stream, tensor::const_tensor_view sink,
                                         tensor::tensor_view dsink) {
  const auto d = head_dims(dims);
  const std::int64_t rows = std::int64_t(d.seq) * d.batch;
  const std::int64_t group_width = std::int64_t(dims.heads / dims.groups + 2) * d.head_dim;
  tensor::tensor heads_dout({rows, std::int64_t(d.heads) * d.head_dim}, dout.type, tensor::memory_kind::activations,
                            dout.where);
  sequence_to_heads(a2a_, shard_, ring_shard_, d.batch, dims.heads, d.head_dim, dout, heads_dout);
  tensor::tensor heads_dqkv({rows, d.qkv_width()}, dout.type, tensor::memory_kind::activations, dout.where);
  const auto at = std::int64_t(a2a_.rank()) * d.heads;
  const auto my_sink = sink.data ? elements(sink, at, d.heads) : sink;
  const auto my_dsink = dsink.data && sink.data ? elements(dsink, at, d.heads) : tensor::tensor_view{};
  ring_.backward(heads_dqkv, heads_dout, qkv_heads_, context_heads_, lse_, d, scale, dropout_p, dropout_stream,
                 my_sink, my_dsink);
  heads_to_sequence(a2a_, shard_, ring_shard_, d.batch, dims.groups, group_width, heads_dqkv, dqkv);
}

void hierarchical_cp_attention::release() {
  qkv_heads_ = tensor::tensor();
  context_heads_ = tensor::tensor();
  lse_ = tensor::tensor();
  ring_.release();
}

}  // namespace mactor::model
