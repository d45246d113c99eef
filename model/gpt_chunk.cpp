// A pipeline chunk of the GPT model: embedding, layers, final norm and loss as the layout says.
#include "model/gpt_chunk.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/dropout.hpp"

namespace mactor::model {
namespace {

const gpt_model_config& checked(const gpt_model_config& c, const group& tp, const chunk_layout& l) {
  auto errors = validate(c);
  if (tp.size() != c.tensor_model_parallel_size || tp.rank() != c.tensor_model_parallel_rank)
    errors.push_back("the tensor-parallel group has size " + std::to_string(tp.size()) +
                     " and rank " + std::to_string(tp.rank()) +
                     " but the config says tensor_model_parallel_size=" +
                     std::to_string(c.tensor_model_parallel_size) + " and rank " +
                     std::to_string(c.tensor_model_parallel_rank));
  if (l.layer_begin < 0 || l.layer_end < l.layer_begin || l.layer_end > c.num_layers)
    errors.push_back("the chunk's layers [" + std::to_string(l.layer_begin) + ", " +
                     std::to_string(l.layer_end) + ") are not inside the model's " +
                     std::to_string(c.num_layers) + " layers");
  if (errors.empty()) return c;
  std::string message = "invalid GPT model config:";
  for (const auto& e : errors) message += "\n  " + e;
  throw std::invalid_argument(message);
}

constexpr std::uint64_t embedding_dropout_site = 3;

}  // namespace

template <typename T>
gpt_chunk<T>::gpt_chunk(const gpt_model_config& config, group& tp, chunk_layout layout)
    : config_(checked(config, tp, layout)), tp_(tp), layout_(layout) {
  // Registration order (Megatron's module order) fixes only the flat buffer layout.
  if (layout_.pre_process) {
    embedding_.emplace(store_, config_, tp.rank(), tp.size());
    word_embeddings_ = embedding_->word_embeddings_id();
  }
  layers_.reserve(layout_.layer_end - layout_.layer_begin);
  for (int i = layout_.layer_begin; i < layout_.layer_end; ++i)
    layers_.emplace_back(store_, i, config_, tp.rank(), tp.size());
  if (layout_.post_process) {
    final_layernorm_.emplace(store_, "decoder.final_layernorm", config_);
    int tied = -1;
    if (!config_.untie_embeddings_and_output_weights) {
      // The same name draws the same initial values as the first stage's embedding.
      if (word_embeddings_ < 0)
        word_embeddings_ = store_.add("embedding.word_embeddings.weight",
                                      {config_.padded_vocab_size, config_.hidden_size},
                                      tp_split::rows, init_kind::normal, config_.init_method_std);
      tied = word_embeddings_;
    }
    output_ = std::make_unique<output_layer_loss<T>>(store_, config_, tp.rank(), tp.size(), tied);
  }
  store_.allocate(config_.seed, tp.rank(), tp.size());
}

template <typename T>
std::size_t gpt_chunk<T>::activation_numel(int micro_batch_size) const {
  return std::size_t(local_rows(micro_batch_size)) * config_.hidden_size;
}

template <typename T>
int gpt_chunk<T>::local_rows(int micro_batch_size) const {
  const int rows = config_.seq_length * micro_batch_size;
  return config_.sequence_parallel ? rows / config_.tensor_model_parallel_size : rows;
}

template <typename T>
void gpt_chunk<T>::all_reduce_sequence_parallel_grads() {
  if (!config_.sequence_parallel) return;
  // One coalesced all-reduce, as Megatron's _allreduce_layernorm_grads flattens its buffers.
  std::vector<T> flat;
  for (const auto& p : store_.all())
    if (p.sequence_parallel) flat.insert(flat.end(), p.grad, p.grad + p.numel);
  if (flat.empty()) return;
  tp_.all_reduce_sum(flat.data(), flat.size());
  std::size_t at = 0;
  for (auto& p : store_.all())
    if (p.sequence_parallel) std::copy_n(flat.data() + at, p.numel, p.grad), at += p.numel;
}

template <typename T>
void gpt_chunk<T>::load_batch(const micro_batch& b, saved& s) const {
  if (b.micro_batch_size <= 0)
    throw std::invalid_argument("micro_batch needs micro_batch_size > 0 (got " +
                                std::to_string(b.micro_batch_size) + ")");
  if (layout_.pre_process && !b.tokens)
    throw std::invalid_argument("the first pipeline stage needs the micro-batch's tokens");
  const int seq = config_.seq_length, mb = b.micro_batch_size, rows = seq * mb;
  s.micro_batch_size = mb;
  const bool learned =
      config_.position_embedding_type == position_embedding_kind::learned_absolute;
  if (layout_.pre_process) s.ids.resize(rows), s.positions.resize(rows);
  if (layout_.post_process) s.labels.resize(rows), s.mask.resize(rows);
  for (int bi = 0; bi < mb; ++bi)
    for (int si = 0; si < seq; ++si) {
      const int from = bi * seq + si, to = si * mb + bi;  // [batch, seq] -> [seq, batch]
      if (layout_.pre_process) {
        const std::int32_t token = b.tokens[from];
        if (token < 0 || token >= config_.padded_vocab_size)
          throw std::invalid_argument("token id " + std::to_string(token) + " at batch row " +
                                      std::to_string(bi) + ", position " + std::to_string(si) +
                                      " is outside the vocabulary [0, " +
                                      std::to_string(config_.padded_vocab_size) +
                                      "); check the tokenizer and --vocab-size");
        s.ids[to] = token;
        s.positions[to] = b.position_ids ? b.position_ids[from] : si;
        if (learned && (s.positions[to] < 0 || s.positions[to] >= config_.max_position_embeddings))
          throw std::invalid_argument("position id " + std::to_string(s.positions[to]) +
                                      " is outside [0, max_position_embeddings=" +
                                      std::to_string(config_.max_position_embeddings) + ")");
      }
      if (layout_.post_process) {
        s.labels[to] = b.labels ? b.labels[from] : 0;
        if (s.labels[to] < 0 || s.labels[to] >= config_.padded_vocab_size)
          throw std::invalid_argument("label " + std::to_string(s.labels[to]) + " at batch row " +
                                      std::to_string(bi) + ", position " + std::to_string(si) +
                                      " is outside the vocabulary [0, " +
                                      std::to_string(config_.padded_vocab_size) + ")");
        s.mask[to] = b.loss_mask ? b.loss_mask[from] : 1.0f;
      }
    }
}

// Embedding (or the kept input), the layers and the final norm; fills stream_ and final_.
template <typename T>
void gpt_chunk<T>::run_forward(const saved& s, bool training) {
  const int seq = config_.seq_length, mb = s.micro_batch_size, rows = seq * mb;
  const int local = local_rows(mb);
  const std::size_t n = std::size_t(local) * config_.hidden_size;
  stream_.resize(layers_.size() + 1);
  for (auto& v : stream_) v.resize(n);
  if (layout_.pre_process)
    embedding_->forward(store_, tp_, s.ids.data(), s.positions.data(), stream_[0].data(), rows,
                        training,
                        kernels::dropout_stream(config_.seed, config_.num_layers,
                                                embedding_dropout_site, s.step));
  else
    std::copy_n(s.input.data(), n, stream_[0].data());
  for (std::size_t i = 0; i < layers_.size(); ++i)
    layers_[i].forward(store_, tp_, stream_[i].data(), stream_[i + 1].data(), seq, mb, training,
                       s.step);
  if (layout_.post_process) {
    final_.resize(n);
    final_layernorm_->forward(store_, stream_.back().data(), final_.data(), local);
  }
}

template <typename T>
loss_and_count gpt_chunk<T>::forward(int slot, const micro_batch& b, const T* input, T* output,
                                     bool training, bool keep, T grad_scale,
                                     std::uint64_t dropout_step) {
  if (keep && slots_.count(slot))
    throw std::logic_error("gpt_chunk: slot " + std::to_string(slot) +
                           " already holds a micro-batch waiting for its backward");
  saved s;
  s.step = dropout_step;
  load_batch(b, s);
  const int rows = config_.seq_length * s.micro_batch_size;
  const std::size_t n = activation_numel(s.micro_batch_size);
  if (!layout_.pre_process) {
    if (!input) throw std::invalid_argument("a stage without the embedding needs an input activation");
    s.input.assign(input, input + n);
  }
  run_forward(s, training);
  loss_and_count result;
  if (layout_.post_process) {
    for (float m : s.mask) result.num_tokens += m;
    if (keep) s.loss_grad.resize(n);
    result.loss_sum = output_->forward_backward(store_, tp_, final_.data(), s.labels.data(),
                                                s.mask.data(), grad_scale,
                                                keep ? s.loss_grad.data() : nullptr, rows);
  } else if (output) {
    std::copy_n(stream_.back().data(), n, output);
  }
  if (keep) {
    // Moving the vectors keeps their buffers, which the embedding's backward still points into.
    slots_.emplace(slot, std::move(s));
    resident_ = slot;
  } else {
    resident_ = -1;
  }
  return result;
}

template <typename T>
void gpt_chunk<T>::backward(int slot, const T* grad_output, T* grad_input, const std::function<void(int)>& progress) {
  auto it = slots_.find(slot);
  if (it == slots_.end())
    throw std::logic_error("gpt_chunk: backward of slot " + std::to_string(slot) +
                           " without a kept forward");
  const saved& s = it->second;
  if (resident_ != slot) run_forward(s, /*training=*/true);  // recompute the activations
  const int rows = local_rows(s.micro_batch_size);
  const std::size_t n = activation_numel(s.micro_batch_size);
  grad_a_.resize(n);
  if (layout_.post_process) {
    final_layernorm_->backward(store_, s.loss_grad.data(), stream_.back().data(), grad_a_.data(),
                               rows, false);
    if (progress) progress(backward_done_final_norm());
  } else {
    if (!grad_output) throw std::invalid_argument("a stage without the loss needs an output gradient");
    std::copy_n(grad_output, n, grad_a_.data());
  }
  for (std::size_t i = layers_.size(); i-- > 0;) {
    layers_[i].backward(store_, tp_, stream_[i].data(), grad_a_.data(), grad_a_.data());
    if (progress) progress(static_cast<int>(i));
  }
  if (layout_.pre_process) {
    embedding_->backward(store_, tp_, grad_a_.data());
    if (progress) progress(backward_done_embedding);
  } else if (grad_input)
    std::copy_n(grad_a_.data(), n, grad_input);
  slots_.erase(it);
  resident_ = -1;
}

template class gpt_chunk<float>;
template class gpt_chunk<double>;

}  // namespace mactor::model
