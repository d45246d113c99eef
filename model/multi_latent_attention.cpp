// Multi-latent attention: latent projections, MLA RoPE, the attention core, output projection.
#include "model/multi_latent_attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/gemm.hpp"
#include "kernels/mla_rope.hpp"
#include "kernels/rope.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/linear_gemms.hpp"
#include "tensor/default_device.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {
namespace {

// A norm over a latent of `width` that runs on the whole sequence on every rank: its gradient is
// complete everywhere (neither a sequence shard's nor a head subset's).
norm latent_norm(parameter_store& store, const std::string& name, gpt_model_config c, int width) {
  c.hidden_size = width;
  c.sequence_parallel = false;
  return norm(store, name, c);
}

kernels::yarn_settings yarn_of(const mla_settings& m) {
  kernels::yarn_settings y;
  y.scaling_factor = m.rotary_scaling_factor;
  y.original_max_position_embeddings = m.original_max_position_embeddings;
  y.beta_fast = m.beta_fast, y.beta_slow = m.beta_slow;
  y.mscale = m.mscale, y.mscale_all_dim = m.mscale_all_dim;
  return y;
}

}  // namespace

multi_latent_attention::multi_latent_attention(parameter_store& store, const std::string& name,
                                               const gpt_model_config& c, int layer, int tp_rank,
                                               int tp_size, group* cp)
    : m_(c.mla), hidden_(c.hidden_size), heads_(c.num_attention_heads / tp_size),
      q_width_(c.mla.qk_head_dim + c.mla.qk_pos_emb_head_dim),
      kv_width_(c.mla.qk_head_dim + c.mla.v_head_dim),
      sequence_parallel_(c.sequence_parallel && tp_size > 1),
      recompute_core_(c.recompute.selective(c.recompute.core_attn)),
      kv_up_(store, name + ".linear_kv_up_proj", c.mla.kv_lora_rank,
             c.num_attention_heads * (c.mla.qk_head_dim + c.mla.v_head_dim), false,
             tp_split::rows, c.init_method_std, tp_size, false, c.fp8),
      linear_proj_(store, name + ".linear_proj", c.num_attention_heads * c.mla.v_head_dim,
                   c.hidden_size, c.add_bias_linear,
                   c.output_layer_init_std(), tp_size,
                   c.sequence_parallel, c.fp8),
      shard_(c.shard()), cp_(cp) {
  if (shard_.cp_size > 1 && (!cp_ || cp_->size() != shard_.cp_size || cp_->rank() != shard_.cp_rank))
    throw std::invalid_argument("multi_latent_attention: context_parallel_size=" + std::to_string(shard_.cp_size) +
                                " needs the context-parallel group of that size with this rank's place");
  // Registration in Megatron's order: the query projections, then the key/value ones.
  const int q_out = c.num_attention_heads * q_width_;
  if (m_.q_lora_rank > 0) {
    q_down_ = store.add(name + ".linear_q_down_proj.weight", {m_.q_lora_rank, hidden_},
                        tp_split::replicated, init_kind::normal, c.init_method_std);
    q_up_.emplace(store, name + ".linear_q_up_proj", m_.q_lora_rank, q_out, false,
                  tp_split::rows, c.init_method_std, tp_size, false, c.fp8);
    if (c.fp8.enabled) store.add_fp8_linear((q_down_fp8_ = std::make_unique<fp8_linear>(c.fp8)).get(), q_down_);
    store[q_down_].fp8_gemm = q_down_fp8_.get();  // --fp8-param-gather holds it as fp8
  } else {
    q_proj_.emplace(store, name + ".linear_q_proj", hidden_, q_out, false, tp_split::rows,
                    c.init_method_std, tp_size, false, c.fp8);
  }
  kv_down_ = store.add(name + ".linear_kv_down_proj.weight",
                       {m_.kv_lora_rank + m_.qk_pos_emb_head_dim, hidden_}, tp_split::replicated,
                       init_kind::normal, c.init_method_std);
  if (c.fp8.enabled) store.add_fp8_linear((kv_down_fp8_ = std::make_unique<fp8_linear>(c.fp8)).get(), kv_down_);
  store[kv_down_].fp8_gemm = kv_down_fp8_.get();
  if (c.qk_layernorm) {
    if (m_.q_lora_rank > 0) q_layernorm_.emplace(latent_norm(store, name + ".q_layernorm", c, m_.q_lora_rank));
    kv_layernorm_.emplace(latent_norm(store, name + ".kv_layernorm", c, m_.kv_lora_rank));
  }
  dims_.heads = dims_.groups = heads_;
  dims_.head_dim = std::max(q_width_, m_.v_head_dim);
  dims_.head_offset = tp_rank * heads_;
  dims_.total_heads = c.num_attention_heads;
  dims_.window = c.layer_attention_window(layer);
  scale_ = std::pow(kernels::yarn_mscale(m_.rotary_scaling_factor, m_.mscale_all_dim), 2) / std::sqrt(double(q_width_));
  make_tables(c);
}

void multi_latent_attention::make_tables(const gpt_model_config& c) {
  const auto y = yarn_of(m_);
  rot_dim_ = m_.yarn ? m_.qk_pos_emb_head_dim : int(m_.qk_pos_emb_head_dim * c.rotary_percent);
  kernels::rope_frequencies plain;
  plain.base = c.rotary_base;
  const auto inv_freq = m_.yarn ? kernels::yarn_inverse_frequencies(rot_dim_, c.rotary_base, y)
                                : kernels::rope_inverse_frequencies(rot_dim_, plain);
  const std::int64_t row = rot_dim_ / 2;
  tensor::tensor cos({c.seq_length, row}, c.params_dtype, tensor::memory_kind::other);
  tensor::tensor sin({c.seq_length, row}, c.params_dtype, tensor::memory_kind::other);
  kernels::mla_rope_tables(cos, sin, c.seq_length, inv_freq, m_.yarn ? kernels::yarn_concentration(y) : 1.0);
  // The rows of this rank's positions (all of them without context parallelism), on the
  // model's device.
  cos_ = tensor::tensor({shard_.local_length(), row}, c.params_dtype, tensor::memory_kind::other, tensor::default_device());
  sin_ = tensor::tensor({shard_.local_length(), row}, c.params_dtype, tensor::memory_kind::other, tensor::default_device());
  for (const auto& r : shard_.runs()) {
    tensor::copy_between(elements(cos_.view(), r.local * row, r.length * row),
                         elements(cos.view(), r.global * row, r.length * row));
    tensor::copy_between(elements(sin_.view(), r.local * row, r.length * row),
                         elements(sin.view(), r.global * row, r.length * row));
  }
}

void multi_latent_attention::set_dims(int seq, int batch) {
  dims_.seq = seq, dims_.batch = batch;
  if (shard_.cp_size == 1) return;
  dims_.kv_seq = shard_.seq_length;
  const auto runs = shard_.runs();
  dims_.num_runs = int(runs.size());
  std::copy(runs.begin(), runs.end(), dims_.runs.begin());
}

void multi_latent_attention::core_forward() {
  auto probs = ensure_activation(probs_, std::int64_t(dims_.batch) * heads_ * dims_.seq, dims_.keys(), qkv_.type());
  kernels::attention_forward(context_, probs, qkv_, dims_, scale_, dropout_, stream_, {},
                             kv_all_.numel() ? tensor::const_tensor_view(kv_all_) : tensor::const_tensor_view{});
}

// dqkv = the core's gradient: under context parallelism the queries' part from here and the keys'
// and values' summed over the cp ranks.
void multi_latent_attention::core_backward(tensor::tensor_view dqkv) {
  if (shard_.cp_size == 1)
    return kernels::attention_backward(dqkv, dcontext_, qkv_, probs_, dims_, scale_, dropout_, stream_);
  auto dkv = ensure_activation(dkv_all_, kv_all_.shape()[0], kv_all_.shape()[1], dqkv.type);
  kernels::fill_zero(dqkv);
  kernels::fill_zero(dkv);
  kernels::attention_backward(dqkv, dcontext_, qkv_, probs_, dims_, scale_, dropout_, stream_, {}, {}, kv_all_, dkv);
  auto mine = ensure_activation(dkv_mine_, dqkv.shape[0], dqkv.shape[1], dqkv.type);
  reduce_scatter_sequence(*cp_, shard_, dims_.batch, dkv, mine);
  kernels::add(dqkv, mine);
}

void multi_latent_attention::pack(tensor::tensor_view qkv) const {
  const std::int64_t hd = dims_.head_dim, qk = m_.qk_head_dim, pe = m_.qk_pos_emb_head_dim;
  for (std::int64_t r = 0; r < rows(); ++r) {
    auto k_pe = elements(tensor::const_tensor_view(k_pe_), r * pe, pe);
    for (std::int64_t h = 0; h < heads_; ++h) {
      const std::int64_t at = (r * heads_ + h) * 3 * hd;
      const std::int64_t q_at = (r * heads_ + h) * q_width_, kv_at = (r * heads_ + h) * kv_width_;
      kernels::copy(elements(qkv, at, q_width_), elements(tensor::const_tensor_view(q_), q_at, q_width_));
      kernels::copy(elements(qkv, at + hd, qk), elements(tensor::const_tensor_view(kv_), kv_at, qk));
      kernels::copy(elements(qkv, at + hd + qk, pe), k_pe);
      kernels::copy(elements(qkv, at + 2 * hd, m_.v_head_dim),
                    elements(tensor::const_tensor_view(kv_), kv_at + qk, m_.v_head_dim));
    }
  }
}

void multi_latent_attention::unpack(tensor::const_tensor_view dqkv, tensor::tensor_view dq,
                                    tensor::tensor_view dkv, tensor::tensor_view dk_pe) const {
  const std::int64_t hd = dims_.head_dim, qk = m_.qk_head_dim, pe = m_.qk_pos_emb_head_dim;
  kernels::fill_zero(dk_pe);
  for (std::int64_t r = 0; r < rows(); ++r) {
    auto d_pe = elements(dk_pe, r * pe, pe);
    for (std::int64_t h = 0; h < heads_; ++h) {
      const std::int64_t at = (r * heads_ + h) * 3 * hd;
      const std::int64_t q_at = (r * heads_ + h) * q_width_, kv_at = (r * heads_ + h) * kv_width_;
      kernels::copy(elements(dq, q_at, q_width_), elements(dqkv, at, q_width_));
      kernels::copy(elements(dkv, kv_at, qk), elements(dqkv, at + hd, qk));
      kernels::add(d_pe, elements(dqkv, at + hd + qk, pe));
      kernels::copy(elements(dkv, kv_at + qk, m_.v_head_dim), elements(dqkv, at + 2 * hd, m_.v_head_dim));
    }
  }
}

// x_full_ -> q_ [rows, heads * q_width], kv_ [rows, heads * kv_width], k_pe_ [rows, pe], with
// RoPE applied to the queries' and the shared key's positional parts.
void multi_latent_attention::project_forward(const parameter_store& store, group& tp) {
  const int n = rows();
  const auto type = x_full_.type();
  const int kr = m_.kv_lora_rank, pe = m_.qk_pos_emb_head_dim;
  single_group none;  // the latent's up projections see the whole sequence
  auto q = ensure_activation(q_, n, std::int64_t(heads_) * q_width_, type);
  if (q_proj_) {
    q_proj_->forward(store, none, x_full_, q, n);
  } else {
    auto lat = ensure_activation(q_lat_, n, m_.q_lora_rank, type);
    linear_gemm_forward(q_down_fp8_.get(), x_full_, store.value(q_down_), lat, n, hidden_, m_.q_lora_rank);
    if (q_layernorm_)
      q_layernorm_->forward(store, lat, ensure_activation(q_lat_n_, n, m_.q_lora_rank, type), n);
    q_up_->forward(store, none, q_layernorm_ ? q_lat_n_ : q_lat_, q, n);
  }
  auto lat = ensure_activation(kv_lat_, n, kr, type);
  auto k_pe = ensure_activation(k_pe_, n, pe, type);
  kv_down_forward(store, lat, k_pe, n);
  if (kv_layernorm_) kv_layernorm_->forward(store, lat, ensure_activation(kv_lat_n_, n, kr, type), n);
  kv_up_.forward(store, none, kv_layernorm_ ? kv_lat_n_ : kv_lat_,
                 ensure_activation(kv_, n, std::int64_t(heads_) * kv_width_, type), n);
  (void)tp;
  kernels::mla_rope_apply(q, cos_, sin_, dims_.seq, dims_.batch, heads_, std::int64_t(heads_) * q_width_,
                          q_width_, m_.qk_head_dim, rot_dim_, false);
  kernels::mla_rope_apply(k_pe, cos_, sin_, dims_.seq, dims_.batch, 1, pe, pe, 0, rot_dim_, false);
}

void multi_latent_attention::forward(const parameter_store& store, group& tp,
                                     tensor::const_tensor_view x, tensor::tensor_view out, int seq,
                                     int batch, float attention_dropout,
                                     std::uint64_t dropout_stream) {
  set_dims(seq, batch);
  dropout_ = attention_dropout, stream_ = dropout_stream;
  const int n = seq * batch;
  auto x_full = ensure_activation(x_full_, n, hidden_, x.type);
  if (sequence_parallel_)
    tp.all_gather(elements(x, 0, std::int64_t(n / tp.size()) * hidden_), x_full);
  else
    kernels::copy(x_full, elements(x, 0, std::int64_t(n) * hidden_));
  project_forward(store, tp);
  const std::int64_t hd = dims_.head_dim;
  auto qkv = ensure_activation(qkv_, n, std::int64_t(heads_) * 3 * hd, x.type);
  pack(qkv);
  if (shard_.cp_size > 1)
    gather_sequence(*cp_, shard_, batch, qkv,
                    ensure_activation(kv_all_, std::int64_t(shard_.seq_length) * batch, qkv.shape[1], x.type));
  auto context = ensure_activation(context_, n, std::int64_t(heads_) * hd, x.type);
  core_forward();
  auto context_v = ensure_activation(context_v_, n, std::int64_t(heads_) * m_.v_head_dim, x.type);
  for (std::int64_t i = 0; i < std::int64_t(n) * heads_; ++i)
    kernels::copy(elements(context_v, i * m_.v_head_dim, m_.v_head_dim),
                  elements(tensor::const_tensor_view(context), i * hd, m_.v_head_dim));
  linear_proj_.forward(store, tp, context_v, out, n);
  if (recompute_core_) probs_ = tensor::tensor();
}

// From dq_, dkv_ and dk_pe_ (after the inverse RoPE) to dx_full_, accumulating weight gradients.
void multi_latent_attention::project_backward(parameter_store& store, group& tp) {
  const int n = rows();
  const auto type = dq_.type();
  const int kr = m_.kv_lora_rank;
  auto dx = ensure_activation(dx_full_, n, hidden_, type);
  // The up projections' input gradients are sums over the heads: all-reduced over tp.
  auto dlat = ensure_activation(dkv_lat_, n, kr, type);
  if (kv_layernorm_) {
    auto dn = ensure_activation(d_lat_n_, n, kr, type);
    kv_up_.backward(store, tp, dkv_, kv_lat_n_, dn, n);
    kv_layernorm_->backward(store, dn, kv_lat_, dlat, n, false);
  } else {
    kv_up_.backward(store, tp, dkv_, kv_lat_, dlat, n);
  }
  kv_down_backward(store, dx, n);
  if (q_proj_) {
    auto dq_in = ensure_activation(dq_lat_, n, hidden_, type);
    q_proj_->backward(store, tp, dq_, x_full_, dq_in, n);
    kernels::add(dx, dq_in);
    return;
  }
  auto dq_lat = ensure_activation(dq_lat_, n, m_.q_lora_rank, type);
  if (q_layernorm_) {
    auto dn = ensure_activation(d_lat_n_, n, m_.q_lora_rank, type);
    q_up_->backward(store, tp, dq_, q_lat_n_, dn, n);
    q_layernorm_->backward(store, dn, q_lat_, dq_lat, n, false);
  } else {
    q_up_->backward(store, tp, dq_, q_lat_, dq_lat, n);
  }
  q_down_backward(store, dq_lat, dx, n);
}

// linear_kv_down_proj's rows are [latent (kv_lora_rank); k_pe (qk_pos_emb_head_dim)]: two GEMMs,
// or under fp8 the one GEMM Megatron runs, its output split by columns.
void multi_latent_attention::kv_down_forward(const parameter_store& store, tensor::tensor_view lat,
                                             tensor::tensor_view k_pe, int n) {
  const int kr = m_.kv_lora_rank, pe = m_.qk_pos_emb_head_dim;
  const auto w = store.value(kv_down_);
  if (!kv_down_fp8_) {
    kernels::linear_forward(x_full_, elements(w, 0, std::int64_t(kr) * hidden_), lat, n, hidden_, kr);
    kernels::linear_forward(x_full_, elements(w, std::int64_t(kr) * hidden_, std::int64_t(pe) * hidden_), k_pe, n,
                            hidden_, pe);
    return;
  }
  auto whole = ensure_activation(kv_down_out_, n, kr + pe, lat.type);
  kv_down_fp8_->forward(x_full_, w, whole, n, hidden_, kr + pe);
  for (std::int64_t r = 0; r < n; ++r) {
    kernels::copy(elements(lat, r * kr, kr), elements(tensor::const_tensor_view(whole), r * (kr + pe), kr));
    kernels::copy(elements(k_pe, r * pe, pe), elements(tensor::const_tensor_view(whole), r * (kr + pe) + kr, pe));
  }
}

// dx = [dlat, dk_pe] W_kv_down (overwritten) and its weight gradient (deferred in a zero-bubble
// weight pass, except under fp8, whose GEMM makes both at once).
void multi_latent_attention::kv_down_backward(parameter_store& store, tensor::tensor_view dx, int n) {
  const int kr = m_.kv_lora_rank, pe = m_.qk_pos_emb_head_dim;
  const std::int64_t kr_w = std::int64_t(kr) * hidden_, pe_w = std::int64_t(pe) * hidden_;
  const tensor::const_tensor_view dlat = dkv_lat_, dk_pe = dk_pe_;
  const auto w = store.value(kv_down_);
  if (kv_down_fp8_) {
    auto dy = ensure_activation(dkv_down_, n, kr + pe, dx.type);
    for (std::int64_t r = 0; r < n; ++r) {
      kernels::copy(elements(dy, r * (kr + pe), kr), elements(dlat, r * kr, kr));
      kernels::copy(elements(dy, r * (kr + pe) + kr, pe), elements(dk_pe, r * pe, pe));
    }
    return kv_down_fp8_->backward(dy, x_full_, w, store.grad(kv_down_), dx, n, hidden_, kr + pe);
  }
  store.weight_grads().add({dlat, dk_pe, x_full_}, [&store, this, n, kr, pe, kr_w, pe_w](auto in) {
    const auto dw = store.grad(kv_down_);
    kernels::linear_backward_weight(in[0], in[2], elements(dw, 0, kr_w), n, hidden_, kr);
    kernels::linear_backward_weight(in[1], in[2], elements(dw, kr_w, pe_w), n, hidden_, pe);
  });
  kernels::linear_backward_input(dlat, elements(w, 0, kr_w), dx, n, hidden_, kr);
  kernels::linear_backward_input(dk_pe, elements(w, kr_w, pe_w), dx, n, hidden_, pe, 1.0);
}

// dx += dq_lat W_q_down, and its weight gradient as kv_down's.
void multi_latent_attention::q_down_backward(parameter_store& store, tensor::const_tensor_view dq_lat,
                                             tensor::tensor_view dx, int n) {
  if (q_down_fp8_) {
    auto part = ensure_activation(dx_q_, n, hidden_, dx.type);
    q_down_fp8_->backward(dq_lat, x_full_, store.value(q_down_), store.grad(q_down_), part, n, hidden_, m_.q_lora_rank);
    return kernels::add(dx, part);
  }
  store.weight_grads().add({dq_lat, x_full_}, [&store, this, n](auto in) {
    kernels::linear_backward_weight(in[0], in[1], store.grad(q_down_), n, hidden_, m_.q_lora_rank);
  });
  kernels::linear_backward_input(dq_lat, store.value(q_down_), dx, n, hidden_, m_.q_lora_rank, 1.0);
}

void multi_latent_attention::backward(parameter_store& store, group& tp,
                                      tensor::const_tensor_view dout, tensor::const_tensor_view x,
                                      tensor::tensor_view dx) {
  (void)x;  // the whole-sequence input was kept (x_full_)
  const int n = rows();
  const std::int64_t hd = dims_.head_dim;
  auto dcontext_v = ensure_activation(dq_, n, std::int64_t(heads_) * m_.v_head_dim, dout.type);
  linear_proj_.backward(store, tp, dout, context_v_, dcontext_v, n);
  auto dcontext = ensure_activation(dcontext_, n, std::int64_t(heads_) * hd, dout.type);
  kernels::fill_zero(dcontext);
  for (std::int64_t i = 0; i < std::int64_t(n) * heads_; ++i)
    kernels::copy(elements(dcontext, i * hd, m_.v_head_dim),
                  elements(tensor::const_tensor_view(dcontext_v), i * m_.v_head_dim, m_.v_head_dim));
  if (recompute_core_) core_forward();  // the context is no longer needed: the rerun may overwrite it
  auto dqkv = ensure_activation(dqkv_, n, std::int64_t(heads_) * 3 * hd, dout.type);
  core_backward(dqkv);
  const int pe = m_.qk_pos_emb_head_dim;
  auto dq = ensure_activation(dq_, n, std::int64_t(heads_) * q_width_, dout.type);
  auto dk_pe = ensure_activation(dk_pe_, n, pe, dout.type);
  unpack(dqkv, dq, ensure_activation(dkv_, n, std::int64_t(heads_) * kv_width_, dout.type), dk_pe);
  if (tp.size() > 1) tp.all_reduce_sum(dk_pe);  // k_pe is shared by the heads of every rank
  kernels::mla_rope_apply(dq, cos_, sin_, dims_.seq, dims_.batch, heads_, std::int64_t(heads_) * q_width_,
                          q_width_, m_.qk_head_dim, rot_dim_, true);
  kernels::mla_rope_apply(dk_pe, cos_, sin_, dims_.seq, dims_.batch, 1, pe, pe, 0, rot_dim_, true);
  project_backward(store, tp);
  if (sequence_parallel_)  // every rank holds the whole gradient: keep this rank's shard
    kernels::copy(elements(dx, 0, std::int64_t(n / tp.size()) * hidden_),
                  elements(tensor::const_tensor_view(dx_full_), std::int64_t(n / tp.size()) * tp.rank() * hidden_,
                           std::int64_t(n / tp.size()) * hidden_));
  else
    kernels::copy(elements(dx, 0, std::int64_t(n) * hidden_), dx_full_);
}

void multi_latent_attention::carry(activation_stash& s) {
  s.carry(dims_, dropout_, stream_, x_full_, q_lat_, q_lat_n_, kv_lat_, kv_lat_n_, qkv_, probs_, context_, context_v_,
          kv_all_);
  if (q_layernorm_) q_layernorm_->carry(s);
  if (kv_layernorm_) kv_layernorm_->carry(s);
}

void multi_latent_attention::release() {
  for (auto* t : {&x_full_, &q_lat_, &q_lat_n_, &kv_lat_, &kv_lat_n_, &q_, &kv_, &k_pe_, &qkv_, &probs_,
                  &context_, &context_v_, &kv_all_, &dkv_all_, &dkv_mine_, &dx_full_, &dq_lat_, &dkv_lat_, &d_lat_n_, &dq_, &dkv_,
                  &dk_pe_, &dqkv_, &dcontext_, &kv_down_out_, &dkv_down_, &dx_q_})
    *t = tensor::tensor();
  for (auto* f : {q_down_fp8_.get(), kv_down_fp8_.get()})
    if (f) f->release();
  if (q_layernorm_) q_layernorm_->release();
  if (kv_layernorm_) kv_layernorm_->release();
  if (q_proj_) q_proj_->release();
  if (q_up_) q_up_->release();
  kv_up_.release();
  linear_proj_.release();
}

}  // namespace mactor::model
