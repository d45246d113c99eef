// Multi-token prediction depths: rolled embeddings, enorm/hnorm, eh_proj, a layer, a final norm.
#include "model/multi_token_prediction.hpp"

#include <stdexcept>
#include <string>

#include "kernels/dropout.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/host_exchange.hpp"

namespace mactor::model {
namespace {

constexpr std::uint64_t embedding_dropout_site = 3;  // as the decoder's embedding

std::string depth_name(int k) { return "mtp.layers." + std::to_string(k); }

// Megatron's roll_tensor(shifts=-1) along the sequence of [seq, batch]-ordered rows: each
// position takes the next one's value, the last position gets 0.
template <typename T>
std::vector<T> rolled(const std::vector<T>& v, int seq, int batch) {
  std::vector<T> out(v.size(), T(0));
  for (int si = 0; si + 1 < seq; ++si)
    for (int bi = 0; bi < batch; ++bi) out[std::size_t(si) * batch + bi] = v[std::size_t(si + 1) * batch + bi];
  return out;
}

// dst[r, col0 : col0 + width] = src[r, :] for rows r (dst has dst_cols columns), or the reverse.
void copy_into_columns(tensor::tensor_view dst, std::int64_t dst_cols, std::int64_t col0,
                       tensor::const_tensor_view src, std::int64_t width, std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r)
    kernels::copy(elements(dst, r * dst_cols + col0, width), elements(src, r * width, width));
}
void copy_from_columns(tensor::tensor_view dst, std::int64_t width, tensor::const_tensor_view src,
                       std::int64_t src_cols, std::int64_t col0, std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r)
    kernels::copy(elements(dst, r * width, width), elements(src, r * src_cols + col0, width));
}

// Megatron runs a depth's eh_proj and layer under one fp8 context for all layers ("MTP only use
// global fp8 context"), whatever --first-last-layers-bf16 keeps out of fp8 in the decoder.
gpt_model_config depth_config(gpt_model_config c) {
  c.fp8.first_last_layers_bf16 = false;
  return c;
}

}  // namespace

multi_token_prediction::depth::depth(parameter_store& store, int k, const gpt_model_config& c,
                                     int tp_rank, int tp_size, int word, moe_groups moe, group* cp)
    : embedding(c, tp_rank, tp_size, word),
      enorm(store, depth_name(k) + ".enorm", c),
      hnorm(store, depth_name(k) + ".hnorm", c),
      eh_proj(store, depth_name(k) + ".eh_proj", 2 * c.hidden_size, c.hidden_size, false,
              tp_split::rows, c.init_method_std, tp_size, c.sequence_parallel && tp_size > 1, c.fp8),
      layer(store, c.num_layers + k, c, tp_rank, tp_size, cp, moe,
            depth_name(k) + ".transformer_layer", c.num_layers - 1),
      final_layernorm(store, depth_name(k) + ".final_layernorm", c) {}

multi_token_prediction::multi_token_prediction(parameter_store& store, const gpt_model_config& c,
                                               int tp_rank, int tp_size, int word, moe_groups moe, group* cp)
    : config_(c), cp_(c.context_parallel_size > 1 ? cp : nullptr) {
  if (c.context_parallel_size > 1 && !cp)
    throw std::invalid_argument("multi-token prediction under context parallelism needs the context-parallel group");
  if (word < 0) throw std::invalid_argument("multi-token prediction needs the word-embedding table on its stage");
  if (c.fp32_residual_connection)
    throw std::invalid_argument("multi-token prediction is not built with --fp32-residual-connection");
  depths_.reserve(std::size_t(c.mtp_num_layers));
  const auto in_depths = depth_config(c);
  for (int k = 0; k < c.mtp_num_layers; ++k)
    depths_.emplace_back(store, k, in_depths, tp_rank, tp_size, word, moe, cp_);
}

template <typename T>
std::vector<T> multi_token_prediction::rolled_over_sequence(const std::vector<T>& values, int times) const {
  if (!cp_) {
    std::vector<T> out = values;
    for (int i = 0; i < times; ++i) out = rolled(out, seq_, batch_);
    return out;
  }
  const auto shard = config_.shard();
  auto whole = gather_sequence_values(*cp_, shard, batch_, values);
  for (int i = 0; i < times; ++i) whole = rolled(whole, shard.seq_length, batch_);
  return local_values(shard, batch_, whole);
}

std::vector<transformer_layer*> multi_token_prediction::layers() {
  std::vector<transformer_layer*> out;
  for (auto& d : depths_) out.push_back(&d.layer);
  return out;
}

std::vector<const transformer_layer*> multi_token_prediction::layers() const {
  std::vector<const transformer_layer*> out;
  for (const auto& d : depths_) out.push_back(&d.layer);
  return out;
}

// eh_proj on [enorm(emb), hnorm(h)] (d.cat), its column blocks all-gathered into d.x (this
// rank's sequence shard under sequence parallelism).
void multi_token_prediction::project_forward(const parameter_store& store, group& tp, depth& d) {
  const int h = config_.hidden_size, tps = tp.size(), part = h / tps;
  auto proj = ensure_activation(d.proj, rows_, part, config_.params_dtype);
  d.eh_proj.forward(store, tp, d.cat, proj, rows_);
  auto x = ensure_activation(d.x, local_rows_, h, config_.params_dtype);
  if (tps == 1) return kernels::copy(x, proj);
  auto all = ensure_activation(gathered_, std::int64_t(tps) * rows_, part, config_.params_dtype);
  tp.all_gather(proj, all);  // [tp, rows, part]
  const int first = config_.sequence_parallel ? local_rows_ * tp.rank() : 0;
  for (int r = 0; r < tps; ++r)
    copy_into_columns(x, h, std::int64_t(r) * part,
                      elements(all, (std::int64_t(r) * rows_ + first) * part, std::int64_t(local_rows_) * part),
                      part, local_rows_);
}

// The gather's backward: this rank's column block of dx (all rows: gathered from the sequence
// shards under sequence parallelism), then eh_proj's backward into dcat_.
void multi_token_prediction::project_backward(parameter_store& store, group& tp, depth& d,
                                              tensor::const_tensor_view dx) {
  const int h = config_.hidden_size, tps = tp.size(), part = h / tps;
  tensor::const_tensor_view full = dx;
  if (config_.sequence_parallel && tps > 1) {
    auto all = ensure_activation(gathered_, rows_, h, dx.type);
    tp.all_gather(dx, all);
    full = all;
  }
  auto dproj = ensure_activation(dproj_, rows_, part, config_.params_dtype);
  copy_from_columns(dproj, part, full, h, std::int64_t(tp.rank()) * part, rows_);
  auto dcat = ensure_activation(dcat_, local_rows_, 2 * h, config_.params_dtype);
  d.eh_proj.backward(store, tp, dproj, d.cat, dcat, rows_);
}

void multi_token_prediction::forward(const parameter_store& store, group& tp,
                                     tensor::const_tensor_view h0,
                                     const std::vector<std::int32_t>& ids, int seq, int batch,
                                     bool training, std::uint64_t step) {
  seq_ = seq, batch_ = batch, rows_ = seq * batch;
  local_rows_ = config_.sequence_parallel ? rows_ / tp.size() : rows_;
  const int h = config_.hidden_size;
  const auto type = config_.params_dtype;
  auto norm_out = ensure_activation(dnorm_, local_rows_, h, type);
  tensor::const_tensor_view prev = h0;
  const std::vector<std::int32_t>* prev_ids = &ids;
  for (std::size_t k = 0; k < depths_.size(); ++k) {
    auto& d = depths_[k];
    d.ids = rolled_over_sequence(*prev_ids, 1);
    prev_ids = &d.ids;
    auto emb = ensure_activation(d.emb, local_rows_, h, type);
    d.device_ids = ints_on_model_device(d.ids);
    d.embedding.forward(store, tp, ints_for_kernels(d.ids, d.device_ids), nullptr, emb, rows_, training,
                        kernels::dropout_stream(config_.seed, config_.num_layers + int(k),
                                                embedding_dropout_site, step));
    auto cat = ensure_activation(d.cat, local_rows_, 2 * h, type);
    d.enorm.forward(store, emb, norm_out, local_rows_);
    copy_into_columns(cat, 2 * h, 0, norm_out, h, local_rows_);
    d.hnorm.forward(store, prev, norm_out, local_rows_);
    copy_into_columns(cat, 2 * h, h, norm_out, h, local_rows_);
    project_forward(store, tp, d);
    auto y = ensure_activation(d.y, local_rows_, h, type);
    d.layer.forward(store, tp, d.x, y, seq, batch, training, step);
    auto out = ensure_activation(d.out, local_rows_, h, type);
    d.final_layernorm.forward(store, y, out, local_rows_);
    prev = out;
  }
}

std::vector<mtp_depth_loss> multi_token_prediction::losses(
    parameter_store& store, group& tp, output_layer_loss& output,
    const std::vector<std::int32_t>& labels, const std::vector<float>& mask, double scale, bool per_token,
    std::vector<tensor::tensor>* grads) {
  std::vector<mtp_depth_loss> out(depths_.size());
  std::vector<std::int32_t> l = labels;
  std::vector<float> m = mask;
  if (grads) grads->resize(depths_.size());
  for (std::size_t k = 0; k < depths_.size(); ++k) {
    l = rolled_over_sequence(l, 1), m = rolled_over_sequence(m, 1);
    for (float v : m) out[k].num_tokens += v;
    // MTPLossAutoScaler's gradient of factor / depths * sum(mask * loss) / sum(mask), or with
    // --calculate-per-token-loss of the sum itself (finalize divides by the LM loss's tokens).
    const double g = scale * config_.mtp_loss_scaling_factor / double(depths_.size()) / (per_token ? 1.0 : out[k].num_tokens);
    tensor::tensor_view dh;
    if (grads) dh = ensure_activation((*grads)[k], local_rows_, config_.hidden_size, config_.params_dtype);
    const auto device_labels = ints_on_model_device(l);
    out[k].loss_sum =
        output.forward_backward(store, tp, depths_[k].out, ints_for_kernels(l, device_labels), m.data(), g, dh, rows_);
  }
  return out;
}

void multi_token_prediction::backward(parameter_store& store, group& tp,
                                      const std::vector<tensor::tensor>& grads,
                                      tensor::const_tensor_view h0, tensor::tensor_view dh0) {
  const int h = config_.hidden_size;
  const auto type = config_.params_dtype;
  auto carry = ensure_activation(carry_, local_rows_, h, type);  // d loss / d (depth k's output)
  auto dy = ensure_activation(dy_, local_rows_, h, type);
  auto dx = ensure_activation(dx_, local_rows_, h, type);
  auto dnorm = ensure_activation(dnorm_, local_rows_, h, type);
  auto demb = ensure_activation(demb_, local_rows_, h, type);
  kernels::fill_zero(carry);
  for (std::size_t k = depths_.size(); k-- > 0;) {
    auto& d = depths_[k];
    kernels::add(carry, grads[k]);
    d.final_layernorm.backward(store, carry, d.y, dy, local_rows_, false);
    d.layer.backward(store, tp, d.x, dy, dx);
    d.layer.release();
    project_backward(store, tp, d, dx);
    copy_from_columns(dnorm, h, dcat_, 2 * h, 0, local_rows_);
    d.enorm.backward(store, dnorm, d.emb, demb, local_rows_, false);
    d.embedding.backward(store, tp, demb);
    copy_from_columns(dnorm, h, dcat_, 2 * h, h, local_rows_);
    if (k == 0)
      d.hnorm.backward(store, dnorm, h0, dh0, local_rows_, true);
    else
      d.hnorm.backward(store, dnorm, depths_[k - 1].out, carry, local_rows_, false);
  }
}

void multi_token_prediction::carry(activation_stash& s) {
  s.carry(seq_, batch_, rows_, local_rows_);
  for (auto& d : depths_) {
    s.carry(d.ids, d.device_ids, d.emb, d.cat, d.x, d.y, d.out);
    d.embedding.carry(s);
    d.enorm.carry(s);
    d.hnorm.carry(s);
    d.layer.carry(s);
    d.final_layernorm.carry(s);
  }
}

void multi_token_prediction::release() {
  for (auto& d : depths_) {
    d.layer.release();
    for (auto* t : {&d.emb, &d.cat, &d.proj, &d.x, &d.y, &d.out}) *t = tensor::tensor();
  }
}

}  // namespace mactor::model
