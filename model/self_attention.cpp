// Self-attention block: qkv projection, rope, attention core, output projection.
#include "model/self_attention.hpp"

#include <cmath>

#include "kernels/rope.hpp"

namespace mactor::model {

template <typename T>
self_attention<T>::self_attention(parameter_store<T>& store, const std::string& name,
                                  const gpt_model_config& c, int tp_rank, int tp_size)
    : linear_qkv_(store, name + ".linear_qkv", c.hidden_size,
                  c.query_groups() * (c.num_attention_heads / c.query_groups() + 2) * c.head_dim(),
                  c.add_bias_linear || c.add_qkv_bias, tp_split::rows, c.init_method_std,
                  tp_size, c.sequence_parallel),
      linear_proj_(store, name + ".linear_proj", c.num_attention_heads * c.head_dim(),
                   c.hidden_size, c.add_bias_linear,
                   c.init_method_std / std::sqrt(2.0 * c.num_layers), tp_size,
                   c.sequence_parallel),
      rope_(c.position_embedding_type == position_embedding_kind::rope),
      rot_dim_(c.rotary_dim()),
      scale_(T(1.0 / std::sqrt(double(c.head_dim())))) {
  dims_.heads = c.num_attention_heads / tp_size;
  dims_.groups = c.query_groups() / tp_size;
  dims_.head_dim = c.head_dim();
  dims_.head_offset = tp_rank * dims_.heads;
  dims_.total_heads = c.num_attention_heads;
  if (rope_) {
    cos_.resize(std::size_t(c.seq_length) * rot_dim_ / 2);
    sin_.resize(cos_.size());
    kernels::rope_tables<T>(cos_.data(), sin_.data(), c.seq_length, rot_dim_, c.rotary_base);
  }
}

template <typename T>
void self_attention<T>::forward(const parameter_store<T>& store, group& tp, const T* x, T* out,
                                int seq, int batch, float attention_dropout,
                                std::uint64_t dropout_stream) {
  dims_.seq = seq;
  dims_.batch = batch;
  dropout_ = attention_dropout;
  stream_ = dropout_stream;
  const int rows = seq * batch;
  const std::int64_t width = dims_.qkv_width();
  qkv_.resize(rows * width);
  probs_.resize(std::size_t(batch) * dims_.heads * seq * seq);
  context_.resize(std::size_t(rows) * dims_.heads * dims_.head_dim);
  linear_qkv_.forward(store, tp, x, qkv_.data(), rows);
  const int per_group = dims_.heads / dims_.groups;
  const std::int64_t group_stride = std::int64_t(per_group + 2) * dims_.head_dim;
  if (rope_)  // queries and the key head of each group are contiguous: rotate per_group + 1 heads
    kernels::rope_apply<T>(qkv_.data(), cos_.data(), sin_.data(), seq, batch, dims_.groups,
                           per_group + 1, dims_.head_dim, rot_dim_, width, group_stride, false);
  kernels::attention_forward<T>(context_.data(), probs_.data(), qkv_.data(), dims_, scale_,
                                dropout_, stream_);
  linear_proj_.forward(store, tp, context_.data(), out, rows);
}

template <typename T>
void self_attention<T>::backward(parameter_store<T>& store, group& tp, const T* dout, const T* x,
                                 T* dx) {
  const int rows = dims_.seq * dims_.batch;
  const std::int64_t width = dims_.qkv_width();
  dcontext_.resize(context_.size());
  dqkv_.resize(qkv_.size());
  linear_proj_.backward(store, tp, dout, context_.data(), dcontext_.data(), rows);
  kernels::attention_backward<T>(dqkv_.data(), dcontext_.data(), qkv_.data(), probs_.data(),
                                 dims_, scale_, dropout_, stream_);
  const int per_group = dims_.heads / dims_.groups;
  if (rope_)
    kernels::rope_apply<T>(dqkv_.data(), cos_.data(), sin_.data(), dims_.seq, dims_.batch,
                           dims_.groups, per_group + 1, dims_.head_dim, rot_dim_, width,
                           std::int64_t(per_group + 2) * dims_.head_dim, true);
  linear_qkv_.backward(store, tp, dqkv_.data(), x, dx, rows);
}

template class self_attention<float>;
template class self_attention<double>;

}  // namespace mactor::model
