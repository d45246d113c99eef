// Megatron-Core's LanguageModelEmbedding: vocab-parallel word embeddings (each tp rank holds a
// block of vocabulary rows; the lookups are summed across ranks), optional learned absolute
// position embeddings, then embedding dropout (hidden_dropout). With sequence parallelism the
// vocab-parallel sum is reduce-scattered so that each rank keeps its [seq / tp, batch] rows
// (Megatron's scatter_to_sequence_parallel_region), and dropout runs on that shard.
#pragma once
#include <cstdint>
#include <string>

#include "model/activation_stash.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/parameter.hpp"

namespace mactor::model {

/// Registers an embedding table ([rows, hidden], split as given) the way Megatron initializes
/// embeddings: its embedding_init_method is normal(--embedding-init-method-std) when that differs
/// from --init-method-std, otherwise init_method (normal(init_method_std), or xavier uniform); with
/// --embedding-init-method-std given the table also skips weight decay (Megatron's optimizer then
/// exempts every parameter named "embedding"). Returns its id.
int add_embedding_table(parameter_store& store, const std::string& name, std::int64_t rows,
                        tp_split split, const gpt_model_config& config);

class language_model_embedding {
 public:
  /// Registers embedding.word_embeddings.weight [vocab, hidden] (rows split) and, for learned
  /// absolute positions, embedding.position_embeddings.weight [max_positions, hidden].
  language_model_embedding(parameter_store& store, const gpt_model_config& config,
                           int tp_rank, int tp_size);
  /// A second user of an existing word table `word` (no position table): a multi-token
  /// prediction depth embeds its rolled ids with the model's embedding, keeping its own state.
  language_model_embedding(const gpt_model_config& config, int tp_rank, int tp_size, int word);
  int word_embeddings_id() const { return word_; }
  /// out[rows, hidden] for token ids and position ids, both in [seq, batch] row order (all rows
  /// of the ids; out holds only this rank's rows / tp with sequence parallelism). Under context
  /// parallelism the rows are this rank's positions (position ids give their places).
  void forward(const parameter_store& store, group& tp, const std::int32_t* ids,
               const std::int32_t* positions, tensor::tensor_view out, int rows, bool training,
               std::uint64_t stream);
  /// Accumulates the embedding gradients from dout [rows, hidden] (the ids of the last forward;
  /// this rank's shard with sequence parallelism); while the store's weight_grads() collect (a
  /// zero-bubble backward), the tables' gradients wait for its W pass.
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view dout);
  /// The word table is also the chunk's output-layer weight (tied), whose gradient accumulates in
  /// the forward: the table's scatter-add then stays in the backward even in a zero-bubble one,
  /// so that its sums keep 1F1B's order.
  void keep_word_grads_in_backward() { word_grads_in_backward_ = true; }
  /// The state the backward reads from the last forward (the token ids it points into stay in
  /// the chunk's saved micro-batch), into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(rows_, ids_, positions_, stream_, p_, placement_); }

 private:
  int hidden_, vocab_start_, vocab_end_, word_, position_ = -1, max_positions_;
  float dropout_, p_ = 0;
  bool sequence_parallel_;
  bool word_grads_in_backward_ = false;
  std::uint64_t stream_ = 0;
  sequence_shard shard_;
  row_placement placement_;  // this rank's rows in the one-rank output (dropout masks)
  int rows_ = 0;
  const std::int32_t* ids_ = nullptr;
  const std::int32_t* positions_ = nullptr;
  tensor::tensor dmasked_, full_;

  /// table's gradient += the rows of dmasked at `ids` (those in [first, end)), now or, while the
  /// store's weight_grads() collect, in the W pass.
  void table_grads(parameter_store& store, int table, tensor::const_tensor_view dmasked, const std::int32_t* ids,
                   int first, int end) const;
};

}  // namespace mactor::model
