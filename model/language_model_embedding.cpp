// Word (+ position) embedding with dropout.
#include "model/language_model_embedding.hpp"

#include <memory>
#include <vector>

#include "kernels/convert.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "model/activation.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {

int add_embedding_table(parameter_store& store, const std::string& name, std::int64_t rows,
                        tp_split split, const gpt_model_config& c) {
  const float std = c.embedding_init_method_std.value_or(c.init_method_std);
  const auto kind = std != c.init_method_std ? init_kind::normal_only : init_kind::normal;
  const int id = store.add(name, {rows, c.hidden_size}, split, kind, std);
  if (c.embedding_init_method_std) store[id].no_weight_decay = true;
  return id;
}

language_model_embedding::language_model_embedding(parameter_store& store,
                                                   const gpt_model_config& c, int tp_rank,
                                                   int tp_size)
    : hidden_(c.hidden_size), vocab_start_(tp_rank * (c.padded_vocab_size / tp_size)),
      vocab_end_(vocab_start_ + c.padded_vocab_size / tp_size),
      max_positions_(c.max_position_embeddings), dropout_(c.hidden_dropout),
      sequence_parallel_(c.sequence_parallel && tp_size > 1), shard_(c.shard()) {
  word_ = add_embedding_table(store, "embedding.word_embeddings.weight", c.padded_vocab_size,
                              tp_split::rows, c);
  if (c.position_embedding_type == position_embedding_kind::learned_absolute)
    position_ = add_embedding_table(store, "embedding.position_embeddings.weight",
                                    c.max_position_embeddings, tp_split::replicated, c);
}

language_model_embedding::language_model_embedding(const gpt_model_config& c, int tp_rank,
                                                   int tp_size, int word)
    : hidden_(c.hidden_size), vocab_start_(tp_rank * (c.padded_vocab_size / tp_size)),
      vocab_end_(vocab_start_ + c.padded_vocab_size / tp_size), word_(word),
      max_positions_(c.max_position_embeddings), dropout_(c.hidden_dropout),
      sequence_parallel_(c.sequence_parallel && tp_size > 1), shard_(c.shard()) {}

void language_model_embedding::forward(const parameter_store& store, group& tp,
                                       const std::int32_t* ids, const std::int32_t* positions,
                                       tensor::tensor_view out, int rows, bool training,
                                       std::uint64_t stream) {
  rows_ = rows, ids_ = ids, positions_ = positions, stream_ = stream;
  p_ = training ? dropout_ : 0.0f;
  // The rows this rank keeps: all of them, or its sequence shard (contiguous in [seq, batch]).
  const int local_rows = sequence_parallel_ ? rows / tp.size() : rows;
  const int first_row = sequence_parallel_ ? local_rows * tp.rank() : 0;
  const std::int64_t local = std::int64_t(local_rows) * hidden_;
  placement_ = row_placement(shard_, rows / shard_.local_length(), first_row, local_rows);
  if (sequence_parallel_) {
    // The vocab-parallel sum lands reduce-scattered on the sequence shards.
    auto full = ensure_activation(full_, rows, hidden_, out.type);
    kernels::embedding_forward(full, store.value(word_), ids, rows, hidden_, vocab_start_,
                               vocab_end_);
    tp.reduce_scatter_sum(full, elements(out, 0, local));
  } else {
    kernels::embedding_forward(out, store.value(word_), ids, rows, hidden_, vocab_start_,
                               vocab_end_);
    if (tp.size() > 1) tp.all_reduce_sum(elements(out, 0, local));
  }
  if (position_ >= 0)
    kernels::embedding_forward(out, store.value(position_), positions + first_row, local_rows,
                               hidden_, 0, max_positions_, 1.0);
  // Megatron adds the two embeddings in the model's dtype and widens the sum for an fp32
  // residual stream (--fp32-residual-connection) before the dropout.
  if (out.type != store.type()) kernels::round_through(elements(out, 0, local), store.type());
  placement_.dropout_apply(elements(out, 0, local), elements(out, 0, local), hidden_, p_, stream_);
}

void language_model_embedding::backward(parameter_store& store, group& tp,
                                        tensor::const_tensor_view dout) {
  const std::int64_t n = std::int64_t(rows_) * hidden_;
  auto dmasked = ensure_activation(dmasked_, rows_, hidden_, dout.type);
  if (sequence_parallel_) {
    // Dropout on this rank's shard, then the shards all-gathered: every rank needs every row's
    // gradient for its vocabulary block and for the (replicated) position table.
    const int shard_rows = rows_ / tp.size();
    auto shard = ensure_activation(full_, shard_rows, hidden_, dout.type);
    placement_.dropout_apply(shard, elements(dout, 0, shard.numel()), hidden_, p_, stream_);
    tp.all_gather(shard, dmasked);
  } else {
    placement_.dropout_apply(dmasked, elements(dout, 0, n), hidden_, p_, stream_);
  }
  if (word_grads_in_backward_)
    kernels::embedding_backward(store.grad(word_), dmasked, ids_, rows_, hidden_, vocab_start_, vocab_end_);
  else
    table_grads(store, word_, dmasked, ids_, vocab_start_, vocab_end_);
  if (position_ >= 0) table_grads(store, position_, dmasked, positions_, 0, max_positions_);
}

void language_model_embedding::table_grads(parameter_store& store, int table, tensor::const_tensor_view dmasked,
                                           const std::int32_t* ids, int first, int end) const {
  // Weight gradients only: a zero-bubble backward leaves them to its W pass, with a copy of the
  // ids (the micro-batch they point into may be gone by then) where they are, beside the model:
  // 4-byte elements, copied as bytes.
  auto& weight_grads = store.weight_grads();
  std::shared_ptr<const tensor::tensor> kept;
  if (weight_grads.collecting() && ids) {
    const auto where = store.value_tensor().where();
    kept = std::make_shared<const tensor::tensor>(tensor::copy_to(
        tensor::const_tensor_view{ids, {rows_}, tensor::dtype::float32, where}, where, tensor::memory_kind::activations));
  }
  const auto* row_ids = kept ? static_cast<const std::int32_t*>(kept->data()) : ids;
  weight_grads.add({dmasked}, [&store, table, kept, row_ids, rows = rows_, hidden = hidden_, first, end](auto in) {
    kernels::embedding_backward(store.grad(table), in[0], row_ids, rows, hidden, first, end);
  });
}

}  // namespace mactor::model
