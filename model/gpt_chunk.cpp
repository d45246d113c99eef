// A pipeline chunk of the GPT model: embedding, layers, final norm and loss as the layout says.
#include "model/gpt_chunk.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/dropout.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/host_exchange.hpp"

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

gpt_chunk::gpt_chunk(const gpt_model_config& config, group& tp, chunk_layout layout, group* cp, moe_groups moe)
    : config_(checked(config, tp, layout)), tp_(tp), layout_(layout), shard_(config_.shard()),
      store_(config_.params_dtype, config_.grads_dtype()) {
  store_.set_xavier_uniform(config_.init_method_xavier_uniform);
  store_.set_skip_weight_init(config_.skip_weight_init);
  // Registration order (Megatron's module order) fixes only the flat buffer layout.
  if (layout_.pre_process) {
    embedding_.emplace(store_, config_, tp.rank(), tp.size());
    word_embeddings_ = embedding_->word_embeddings_id();
  }
  layers_.reserve(layout_.layer_end - layout_.layer_begin);
  for (int i = layout_.layer_begin; i < layout_.layer_end; ++i)
    layers_.emplace_back(store_, i, config_, tp.rank(), tp.size(), cp, moe);
  if (layout_.post_process) {
    // MambaStack's final norm is a TENorm named final_norm; GPT's TransformerBlock's final_layernorm.
    final_layernorm_.emplace(store_, config_.hybrid() ? "decoder.final_norm" : "decoder.final_layernorm", config_);
    // The table's copy off the first stage: the same name draws the same initial values as the
    // first stage's embedding (Megatron zero-fills it and all-reduces it with the first's).
    if (config_.shares_word_embedding() && word_embeddings_ < 0)
      word_embeddings_ = add_embedding_table(store_, "embedding.word_embeddings.weight", config_.padded_vocab_size,
                                             tp_split::rows, config_);
    const int tied = config_.untie_embeddings_and_output_weights ? -1 : word_embeddings_;
    if (config_.mtp_num_layers > 0) {
      mtp_.emplace(store_, config_, tp.rank(), tp.size(), word_embeddings_, moe, cp);
      mtp_tracker_.assign(std::size_t(config_.mtp_num_layers), 0.0);
    }
    // The output layer's gradient of a tied table accumulates in the forward: the embeddings'
    // part stays in the backward, in 1F1B's order, also under a zero-bubble schedule.
    if (tied >= 0) {
      if (embedding_) embedding_->keep_word_grads_in_backward();
      if (mtp_) mtp_->keep_embedding_grads_in_backward();
    }
    output_ = std::make_unique<output_layer_loss>(store_, config_, tp.rank(), tp.size(), tied);
  }
  groups_ = recompute_groups(config_.recompute, int(layers_.size()));
  distributed_.resize(groups_.size());
  if (const int etp = config_.moe.expert_tensor_parallel_size; config_.moe.enabled() && etp > 1 && etp != tp.size())
    store_.set_expert_split(config_.moe.expert_tensor_parallel_rank, etp);
  if (config_.init_model_with_meta_device) {
    store_.lay_out(tp.size());
  } else {
    store_.allocate(config_.seed, tp.rank(), tp.size());
    for (const auto& l : layers_) l.initialize(store_, config_.seed, tp.rank());
  }
  amax_ = std::make_unique<fp8_amax_reduction>(store_.fp8_linears());
}

void gpt_chunk::materialize_shard(std::vector<held_range> ranges, std::size_t length) {
  store_.materialize_shard(config_.seed, tp_.rank(), tp_.size(), std::move(ranges), length);
  for (const auto& l : layers_) l.initialize(store_, config_.seed, tp_.rank());
}

std::size_t gpt_chunk::activation_numel(int micro_batch_size) const {
  return std::size_t(local_rows(micro_batch_size)) * config_.hidden_size;
}

double gpt_chunk::loss_tokens(const micro_batch& b) const {
  double count = 0;
  for (int bi = 0; bi < b.micro_batch_size; ++bi)
    for (const auto& r : shard_.runs())
      for (int si = r.global; si < r.global + r.length; ++si)
        count += b.loss_mask ? b.loss_mask[std::size_t(bi) * config_.seq_length + si] : 1.0;
  return count;
}

int gpt_chunk::local_rows(int micro_batch_size) const {
  const int rows = shard_.local_length() * micro_batch_size;
  return config_.sequence_parallel ? rows / config_.tensor_model_parallel_size : rows;
}

void gpt_chunk::all_reduce_sequence_parallel_grads(int unit) {
  if (tp_.size() == 1) return;
  const auto summed = [&](const parameter& p) { return p.summed_over_tp() && (unit < 0 || unit_of(p) == unit); };
  // One coalesced all-reduce, as Megatron's _allreduce_layernorm_grads flattens its buffers.
  std::int64_t total = 0;
  tensor::device where = tensor::cpu;  // the gradients' device
  for (const auto& p : store_.all())
    if (summed(p)) total += std::int64_t(p.numel), where = p.grad.where;
  if (total == 0) return;
  tensor::tensor flat({total}, store_.grad_type(), tensor::memory_kind::communication, where);
  std::int64_t at = 0;
  for (const auto& p : store_.all())
    if (summed(p)) {
      kernels::copy(elements(flat.view(), at, std::int64_t(p.numel)), p.grad);
      at += std::int64_t(p.numel);
    }
  tp_.all_reduce_sum(flat);
  at = 0;
  for (auto& p : store_.all())
    if (summed(p)) {
      kernels::copy(p.grad, elements(flat.view(), at, std::int64_t(p.numel)));
      at += std::int64_t(p.numel);
    }
}

void gpt_chunk::load_batch(const micro_batch& b, saved& s) const {
  if (b.micro_batch_size <= 0)
    throw std::invalid_argument("micro_batch needs micro_batch_size > 0 (got " +
                                std::to_string(b.micro_batch_size) + ")");
  if (layout_.pre_process && !b.tokens)
    throw std::invalid_argument("the first pipeline stage needs the micro-batch's tokens");
  const int seq = config_.seq_length, local_seq = shard_.local_length();
  const int mb = b.micro_batch_size, rows = local_seq * mb;
  s.micro_batch_size = mb;
  const bool learned =
      config_.position_embedding_type == position_embedding_kind::learned_absolute;
  const bool ids = layout_.pre_process || mtp_;
  if (ids && !b.tokens) throw std::invalid_argument("multi-token prediction needs the micro-batch's tokens on the last stage");
  if (ids) s.ids.resize(rows), s.positions.resize(rows);
  if (layout_.post_process) s.labels.resize(rows), s.mask.resize(rows);
  if (b.document_start) s.document_start.assign(b.document_start, b.document_start + std::size_t(mb) * seq);
  const std::vector<int> positions = shard_.positions();
  for (int bi = 0; bi < mb; ++bi)
    for (int li = 0; li < local_seq; ++li) {
      // [batch, seq] -> [seq, batch], this rank's positions only
      const int si = positions[std::size_t(li)], from = bi * seq + si, to = li * mb + bi;
      if (ids) {
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
  // A model on a device has its kernels read the arrays from the device's memory.
  s.device_ids = ints_on_model_device(s.ids), s.device_positions = ints_on_model_device(s.positions);
  s.device_labels = ints_on_model_device(s.labels), s.device_document_start = ints_on_model_device(s.document_start);
}

tensor::tensor_view gpt_chunk::stream(int i, const saved& s) {
  return ensure_activation(stream_[std::size_t(i)], local_rows(s.micro_batch_size),
                           config_.hidden_size, activation_dtype());
}

// Embedding (or the kept input), the layers and the final norm; fills stream_ and final_. A
// checkpointed group frees its layers' activations and its inner stream entries as it goes.
void gpt_chunk::use_document_mask(const saved& s) {
  const std::int32_t* starts = s.document_start.empty() ? nullptr : ints_for_kernels(s.document_start, s.device_document_start);
  for (auto& layer : layers_) layer.set_document_starts(starts);
  if (mtp_)
    for (auto* layer : mtp_->layers()) layer->set_document_starts(starts);
}

void gpt_chunk::run_forward(const saved& s, bool training) {
  use_document_mask(s);
  const int seq = shard_.local_length(), mb = s.micro_batch_size, rows = seq * mb;
  const int local = local_rows(mb), hidden = config_.hidden_size;
  stream_.resize(layers_.size() + 1);
  distributed_.resize(groups_.size());  // both may have moved into a stash with another micro-batch
  if (layout_.pre_process) {
    use_unit(0, true);
    embedding_->forward(store_, tp_, ints_for_kernels(s.ids, s.device_ids), ints_for_kernels(s.positions, s.device_positions),
                        stream(0, s), rows,
                        training,
                        kernels::dropout_stream(config_.seed, config_.num_layers,
                                                embedding_dropout_site, s.step));
    done_unit(0, true);
  } else {
    kernels::copy(stream(0, s), s.input);
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto [begin, end, checkpointed] = groups_[g];
    for (int i = begin; i < end; ++i) {
      use_unit(1 + i, true);
      layers_[std::size_t(i)].forward(store_, tp_, stream_[std::size_t(i)], stream(i + 1, s), seq,
                                      mb, training, s.step);
      done_unit(1 + i, true);
      if (!checkpointed) continue;
      layers_[std::size_t(i)].release();
      if (i != begin) stream_[std::size_t(i)] = tensor::tensor();
    }
    if (checkpointed && config_.recompute.distribute_saved_activations) distribute_group_input(g);
  }
  // The post-process units stay in use through forward()'s loss.
  if (layout_.post_process) {
    use_post_units(true);
    final_layernorm_->forward(store_, stream_.back(),
                              ensure_activation(final_, local, hidden, store_.type()), local);
  }
  if (mtp_) mtp_->forward(store_, tp_, final_, s.ids, seq, mb, training, s.step);
}

void gpt_chunk::use_post_units(bool forward) {
  if (!units_) return;
  if (post_reads_word_table()) units_->use(0, forward);
  units_->use(num_units() - 1, forward);
}

void gpt_chunk::done_post_units(bool forward) {
  if (!units_) return;
  units_->done(num_units() - 1, forward);
  if (post_reads_word_table()) units_->done(0, forward);
}

// Megatron's split_tensor_into_1d_equal_chunks: rank r keeps elements [r * part, (r + 1) * part)
// of the flattened input (the last part padded).
void gpt_chunk::distribute_group_input(std::size_t g) {
  auto& input = stream_[std::size_t(groups_[g].begin)];
  const std::int64_t n = input.numel(), ranks = tp_.size(), part = (n + ranks - 1) / ranks;
  const std::int64_t from = std::min(n, part * tp_.rank()), count = std::min(n - from, part);
  auto mine = ensure_activation(distributed_[g], 1, part, input.type());
  kernels::copy(elements(mine, 0, count), elements(input.view(), from, count));
  input = tensor::tensor();
}

void gpt_chunk::recompute_group(std::size_t g, const saved& s) {
  const auto [begin, end, checkpointed] = groups_[g];
  if (config_.recompute.distribute_saved_activations) {
    const std::int64_t n = std::int64_t(activation_numel(s.micro_batch_size));
    const std::int64_t part = distributed_[g].numel();
    tensor::tensor gathered({part * tp_.size()}, activation_dtype(), tensor::memory_kind::activations,
                            distributed_[g].where());
    tp_.all_gather(distributed_[g], gathered);
    kernels::copy(stream(begin, s), elements(gathered.view(), 0, n));
    distributed_[g] = tensor::tensor();
  }
  for (int i = begin; i < end; ++i) {
    use_unit(1 + i, true);
    layers_[std::size_t(i)].forward(store_, tp_, stream_[std::size_t(i)], stream(i + 1, s),
                                    shard_.local_length(), s.micro_batch_size, true, s.step);
    done_unit(1 + i, true);
  }
}

loss_and_count gpt_chunk::forward(int slot, const micro_batch& b, tensor::const_tensor_view input,
                                  tensor::tensor_view output, bool training, bool keep,
                                  double grad_scale, std::uint64_t dropout_step) {
  if (keep && slots_.count(slot))
    throw std::logic_error("gpt_chunk: slot " + std::to_string(slot) +
                           " already holds a micro-batch waiting for its backward");
  park_resident();
  saved s;
  s.step = dropout_step;
  load_batch(b, s);
  const int rows = shard_.local_length() * s.micro_batch_size;
  const int local = local_rows(s.micro_batch_size), hidden = config_.hidden_size;
  const std::int64_t n = std::int64_t(activation_numel(s.micro_batch_size));
  if (!layout_.pre_process) {
    if (!input.data)
      throw std::invalid_argument("a stage without the embedding needs an input activation");
    // The stage boundary: the pipeline's buffers may be host memory beside a model on a device.
    tensor::copy_between(ensure_activation(s.input, local, hidden, activation_dtype()), elements(input, 0, n));
  }
  run_forward(s, training);
  loss_and_count result;
  if (layout_.post_process) {
    for (float m : s.mask) result.num_tokens += m;
    tensor::tensor_view loss_grad;
    if (keep) loss_grad = ensure_activation(s.loss_grad, local, hidden, store_.type());
    if (keep && units_) {  // the output layer's (and a shared word table's) weight gradients, made now
      if (post_reads_word_table()) units_->grads_needed(0);
      units_->grads_needed(num_units() - 1);
    }
    result.loss_sum = output_->forward_backward(store_, tp_, final_, ints_for_kernels(s.labels, s.device_labels),
                                                s.mask.data(), grad_scale, loss_grad, rows);
    if (mtp_) {
      const auto losses = mtp_->losses(store_, tp_, *output_, s.labels, s.mask, mtp_scale_, mtp_per_token_,
                                         keep ? &s.mtp_grads : nullptr);
      if (training)
        for (std::size_t k = 0; k < losses.size(); ++k) mtp_tracker_[k] += losses[k].loss_sum / losses[k].num_tokens;
    }
  } else if (output.data) {
    tensor::copy_between(elements(output, 0, n), stream_.back());
  }
  if (layout_.post_process) done_post_units(true);
  amax_->after(fp8_linear::pass::forward);
  if (keep) {
    // Moving the vectors keeps their buffers, which the embedding's backward still points into.
    slots_.emplace(slot, std::move(s));
    resident_ = slot;
  } else {
    resident_ = -1;
  }
  return result;
}

void gpt_chunk::backward(int slot, tensor::const_tensor_view grad_output,
                         tensor::tensor_view grad_input, const std::function<void(int)>& progress) {
  auto it = slots_.find(slot);
  if (it == slots_.end())
    throw std::logic_error("gpt_chunk: backward of slot " + std::to_string(slot) +
                           " without a kept forward");
  saved& s = it->second;
  if (resident_ != slot) {
    park_resident();
    if (!s.stash)
      throw std::logic_error("gpt_chunk: slot " + std::to_string(slot) + " holds neither the layers' activations nor a stash");
    s.stash->start_taking();
    carry_activations(*s.stash);
    s.stash.reset();
  }
  use_document_mask(s);
  const int rows = local_rows(s.micro_batch_size);
  const std::int64_t n = std::int64_t(activation_numel(s.micro_batch_size));
  auto grad = ensure_activation(grad_a_, rows, config_.hidden_size, activation_dtype());
  if (layout_.post_process) {
    use_post_units(false);
    if (mtp_) {
      mtp_->backward(store_, tp_, s.mtp_grads, final_, s.loss_grad);
      mtp_->release();
    }
    final_layernorm_->backward(store_, s.loss_grad, stream_.back(), grad, rows, false);
    done_post_units(false);
    if (progress) progress(backward_done_final_norm());
  } else {
    if (!grad_output.data)
      throw std::invalid_argument("a stage without the loss needs an output gradient");
    tensor::copy_between(grad, elements(grad_output, 0, n));
  }
  for (std::size_t g = groups_.size(); g-- > 0;) {
    const auto [begin, end, checkpointed] = groups_[g];
    if (checkpointed) recompute_group(g, s);
    for (int i = end; i-- > begin;) {
      use_unit(1 + i, false);
      layers_[std::size_t(i)].backward(store_, tp_, stream_[std::size_t(i)], grad, grad);
      done_unit(1 + i, false);
      // As autograd frees a layer's saved tensors once its backward ran (the block cache makes
      // the next forward's allocations cheap); the next layer's recomputation reuses them.
      layers_[std::size_t(i)].release();
      if (checkpointed) stream_[std::size_t(i) + 1] = tensor::tensor();
      if (progress) progress(i);
    }
  }
  if (layout_.pre_process) {
    if (units_) units_->grads_needed(0);
    embedding_->backward(store_, tp_, grad);  // its gradients only: no values, no gather
    if (progress) progress(backward_done_embedding);
  } else if (grad_input.data) {
    tensor::copy_between(elements(grad_input, 0, n), grad);
  }
  amax_->after(fp8_linear::pass::backward);
  slots_.erase(it);
  resident_ = -1;
}

void gpt_chunk::park_resident() {
  if (resident_ < 0) return;
  const auto it = slots_.find(resident_);
  resident_ = -1;
  if (it == slots_.end()) return;
  it->second.stash = std::make_unique<activation_stash>();
  carry_activations(*it->second.stash);
}

// One list serves both ways: the chunk's own tensors, then its parts in order.
void gpt_chunk::carry_activations(activation_stash& s) {
  s.carry(stream_, final_, distributed_);
  if (embedding_) embedding_->carry(s);
  for (auto& l : layers_) l.carry(s);
  if (final_layernorm_) final_layernorm_->carry(s);
  if (mtp_) mtp_->carry(s);
}

}  // namespace mactor::model
