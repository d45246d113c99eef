// Word (+ position) embedding with dropout.
#include "model/language_model_embedding.hpp"

#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"

namespace mactor::model {

template <typename T>
language_model_embedding<T>::language_model_embedding(parameter_store<T>& store,
                                                      const gpt_model_config& c, int tp_rank,
                                                      int tp_size)
    : hidden_(c.hidden_size), vocab_start_(tp_rank * (c.padded_vocab_size / tp_size)),
      vocab_end_(vocab_start_ + c.padded_vocab_size / tp_size),
      max_positions_(c.max_position_embeddings), dropout_(c.hidden_dropout),
      sequence_parallel_(c.sequence_parallel && tp_size > 1) {
  word_ = store.add("embedding.word_embeddings.weight", {c.padded_vocab_size, c.hidden_size},
                    tp_split::rows, init_kind::normal, c.init_method_std);
  if (c.position_embedding_type == position_embedding_kind::learned_absolute)
    position_ = store.add("embedding.position_embeddings.weight",
                          {c.max_position_embeddings, c.hidden_size}, tp_split::replicated,
                          init_kind::normal, c.init_method_std);
}

template <typename T>
void language_model_embedding<T>::forward(const parameter_store<T>& store, group& tp,
                                          const std::int32_t* ids, const std::int32_t* positions,
                                          T* out, int rows, bool training, std::uint64_t stream) {
  rows_ = rows, ids_ = ids, positions_ = positions, stream_ = stream;
  p_ = training ? dropout_ : 0.0f;
  // The rows this rank keeps: all of them, or its sequence shard (contiguous in [seq, batch]).
  const int local_rows = sequence_parallel_ ? rows / tp.size() : rows;
  const int first_row = sequence_parallel_ ? local_rows * tp.rank() : 0;
  first_index_ = std::uint64_t(first_row) * hidden_;
  if (sequence_parallel_) {
    // The vocab-parallel sum lands reduce-scattered on the sequence shards.
    full_.resize(std::size_t(rows) * hidden_);
    kernels::embedding_forward<T>(full_.data(), store.value(word_), ids, rows, hidden_,
                                  vocab_start_, vocab_end_);
    tp.reduce_scatter_sum(full_.data(), out, std::size_t(local_rows) * hidden_);
  } else {
    kernels::embedding_forward<T>(out, store.value(word_), ids, rows, hidden_, vocab_start_,
                                  vocab_end_);
    if (tp.size() > 1) tp.all_reduce_sum(out, std::size_t(rows) * hidden_);
  }
  if (position_ >= 0)
    kernels::embedding_forward<T>(out, store.value(position_), positions + first_row, local_rows,
                                  hidden_, 0, max_positions_, T(1));
  kernels::dropout_apply<T>(out, out, std::int64_t(local_rows) * hidden_, p_, stream_,
                            first_index_);
}

template <typename T>
void language_model_embedding<T>::backward(parameter_store<T>& store, group& tp, const T* dout) {
  const std::int64_t n = std::int64_t(rows_) * hidden_;
  dmasked_.resize(n);
  if (sequence_parallel_) {
    // Dropout on this rank's shard, then the shards all-gathered: every rank needs every row's
    // gradient for its vocabulary block and for the (replicated) position table.
    const std::int64_t shard = n / tp.size();
    full_.resize(shard);
    kernels::dropout_apply<T>(full_.data(), dout, shard, p_, stream_, first_index_);
    tp.all_gather(full_.data(), dmasked_.data(), std::size_t(shard));
  } else {
    kernels::dropout_apply<T>(dmasked_.data(), dout, n, p_, stream_);
  }
  kernels::embedding_backward<T>(store.grad(word_), dmasked_.data(), ids_, rows_, hidden_,
                                 vocab_start_, vocab_end_);
  if (position_ >= 0)
    kernels::embedding_backward<T>(store.grad(position_), dmasked_.data(), positions_, rows_,
                                   hidden_, 0, max_positions_);
}

template class language_model_embedding<float>;
template class language_model_embedding<double>;

}  // namespace mactor::model
