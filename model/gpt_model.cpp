// GPT model: wiring of embedding, layers, final norm and loss, forward then backward.
#include "model/gpt_model.hpp"

#include <stdexcept>
#include <string>

#include "kernels/dropout.hpp"

namespace mactor::model {
namespace {

const gpt_model_config& checked(const gpt_model_config& c, const group& tp) {
  auto errors = validate(c);
  if (tp.size() != c.tensor_model_parallel_size || tp.rank() != c.tensor_model_parallel_rank)
    errors.push_back("the tensor-parallel group has size " + std::to_string(tp.size()) +
                     " and rank " + std::to_string(tp.rank()) +
                     " but the config says tensor_model_parallel_size=" +
                     std::to_string(c.tensor_model_parallel_size) + " and rank " +
                     std::to_string(c.tensor_model_parallel_rank));
  if (errors.empty()) return c;
  std::string message = "invalid GPT model config:";
  for (const auto& e : errors) message += "\n  " + e;
  throw std::invalid_argument(message);
}

constexpr std::uint64_t embedding_dropout_site = 3;

}  // namespace

template <typename T>
gpt_model<T>::gpt_model(const gpt_model_config& config, group& tp)
    : config_(checked(config, tp)), tp_(tp),
      embedding_(store_, config_, tp.rank(), tp.size()) {
  // Registration order (Megatron's module order) fixes only the flat buffer layout.
  layers_.reserve(config_.num_layers);
  for (int i = 0; i < config_.num_layers; ++i)
    layers_.emplace_back(store_, i, config_, tp.rank(), tp.size());
  final_layernorm_.emplace(store_, "decoder.final_layernorm", config_);
  output_ = std::make_unique<output_layer_loss<T>>(
      store_, config_, tp.rank(), tp.size(),
      config_.untie_embeddings_and_output_weights ? -1 : embedding_.word_embeddings_id());
  store_.allocate(config_.seed, tp.rank(), tp.size());
}

template <typename T>
void gpt_model<T>::load_batch(const micro_batch& b) {
  if (!b.tokens || b.micro_batch_size <= 0)
    throw std::invalid_argument("micro_batch needs tokens and micro_batch_size > 0 (got " +
                                std::to_string(b.micro_batch_size) + ")");
  const int s = config_.seq_length, mb = b.micro_batch_size, rows = s * mb;
  ids_.resize(rows), positions_.resize(rows), labels_.resize(rows), mask_.resize(rows);
  const bool learned =
      config_.position_embedding_type == position_embedding_kind::learned_absolute;
  for (int bi = 0; bi < mb; ++bi)
    for (int si = 0; si < s; ++si) {
      const int from = bi * s + si, to = si * mb + bi;
      const std::int32_t token = b.tokens[from];
      if (token < 0 || token >= config_.padded_vocab_size)
        throw std::invalid_argument("token id " + std::to_string(token) + " at batch row " +
                                    std::to_string(bi) + ", position " + std::to_string(si) +
                                    " is outside the vocabulary [0, " +
                                    std::to_string(config_.padded_vocab_size) +
                                    "); check the tokenizer and --vocab-size");
      ids_[to] = token;
      positions_[to] = b.position_ids ? b.position_ids[from] : si;
      labels_[to] = b.labels ? b.labels[from] : 0;
      if (labels_[to] < 0 || labels_[to] >= config_.padded_vocab_size)
        throw std::invalid_argument("label " + std::to_string(labels_[to]) + " at batch row " +
                                    std::to_string(bi) + ", position " + std::to_string(si) +
                                    " is outside the vocabulary [0, " +
                                    std::to_string(config_.padded_vocab_size) + ")");
      if (learned && (positions_[to] < 0 || positions_[to] >= config_.max_position_embeddings))
        throw std::invalid_argument("position id " + std::to_string(positions_[to]) +
                                    " is outside [0, max_position_embeddings=" +
                                    std::to_string(config_.max_position_embeddings) + ")");
      mask_[to] = b.loss_mask ? b.loss_mask[from] : 1.0f;
    }
}

template <typename T>
loss_and_count gpt_model<T>::run(const micro_batch& b, bool training, bool backward,
                                 T grad_scale) {
  load_batch(b);
  const int seq = config_.seq_length, mb = b.micro_batch_size, rows = seq * mb;
  const std::size_t n = std::size_t(rows) * config_.hidden_size;
  stream_.resize(config_.num_layers + 1);
  for (auto& s : stream_) s.resize(n);
  final_.resize(n);
  embedding_.forward(store_, tp_, ids_.data(), positions_.data(), stream_[0].data(), rows,
                     training,
                     kernels::dropout_stream(config_.seed, config_.num_layers,
                                             embedding_dropout_site, step_));
  for (int i = 0; i < config_.num_layers; ++i)
    layers_[i].forward(store_, tp_, stream_[i].data(), stream_[i + 1].data(), seq, mb, training,
                       step_);
  final_layernorm_->forward(store_, stream_.back().data(), final_.data(), rows);
  loss_and_count result;
  for (float m : mask_) result.num_tokens += m;
  if (backward) grad_a_.resize(n), grad_b_.resize(n);
  result.loss_sum = output_->forward_backward(store_, tp_, final_.data(), labels_.data(),
                                              mask_.data(), grad_scale,
                                              backward ? grad_b_.data() : nullptr, rows);
  if (!backward) return result;
  final_layernorm_->backward(store_, grad_b_.data(), stream_.back().data(), grad_a_.data(), rows,
                            false);
  for (int i = config_.num_layers - 1; i >= 0; --i)
    layers_[i].backward(store_, tp_, stream_[i].data(), grad_a_.data(), grad_a_.data());
  embedding_.backward(store_, grad_a_.data());
  return result;
}

template <typename T>
loss_and_count gpt_model<T>::forward_backward(const micro_batch& b, T grad_scale) {
  const auto result = run(b, true, true, grad_scale);
  ++step_;
  return result;
}

template <typename T>
loss_and_count gpt_model<T>::forward_only(const micro_batch& b, bool apply_dropout) {
  return run(b, apply_dropout, false, T(0));
}

template class gpt_model<float>;
template class gpt_model<double>;

}  // namespace mactor::model
