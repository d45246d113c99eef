// Mamba-2 mixer over the kernels: in_proj, conv1d + SiLU, SSD scan, gated RMSNorm, out_proj.
// The linears see [seq, batch] rows; the conv, scan and norm run on [batch, seq] copies.
#include "model/mamba_mixer.hpp"

#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/causal_conv1d.hpp"
#include "kernels/convert.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/gated_rmsnorm.hpp"
#include "model/activation.hpp"
#include "model/mamba_layout.hpp"
#include "model/mamba_context_parallel.hpp"

namespace mactor::model {

namespace {

int checked_tp(const mamba_mixer_config& c, int tp_size) {
  if (c.heads() % tp_size != 0 || c.num_groups % tp_size != 0)
    throw std::invalid_argument("the Mamba heads (" + std::to_string(c.heads()) + ") and groups (" +
                                std::to_string(c.num_groups) + ") must be multiples of --tensor-model-parallel-size " +
                                std::to_string(tp_size));
  return tp_size;
}

// Rank `rank`'s runs of a full [rows, width] tensor split by row_segments `segments` into
// `local` (the mixer's own draws, which the store cannot make).
std::vector<double> shard_of(const std::vector<double>& full, const std::vector<std::int64_t>& segments, int width,
                             int rank, int size) {
  std::vector<double> local;
  std::int64_t first = 0;
  for (const auto rows : segments) {
    const std::int64_t mine = rows / size, begin = (first + rank * mine) * width;
    local.insert(local.end(), full.begin() + begin, full.begin() + begin + mine * width);
    first += rows;
  }
  return local;
}

constexpr auto bs = row_order::batch_seq, sb = row_order::seq_batch;
using part = mamba_context_parallel::part;

}  // namespace

mamba_mixer::mamba_mixer(parameter_store& store, const std::string& name,
                         const mamba_mixer_config& c, int tp_size, group* cp, const sequence_shard& shard)
    : c_(c), tp_(checked_tp(c, tp_size)),
      cp_(cp, shard, c.heads() / tp_size, c.num_groups / tp_size, c.head_dim, c.state_dim),
      conv_weight_(store.add(name + ".conv1d.weight", {c.conv_dim(), 1, c.conv_width},
                             tp_split::row_segments, init_kind::zeros)),
      conv_bias_(store.add(name + ".conv1d.bias", {c.conv_dim()}, tp_split::row_segments,
                           init_kind::zeros)),
      dt_bias_(store.add(name + ".dt_bias", {c.heads()}, tp_split::rows, init_kind::zeros)),
      A_log_(store.add(name + ".A_log", {c.heads()}, tp_split::rows, init_kind::zeros)),
      D_(store.add(name + ".D", {c.heads()}, tp_split::rows, init_kind::ones)),
      norm_weight_(store.add(name + ".norm.weight", {c.d_inner()}, tp_split::rows,
                             init_kind::ones)),
      in_proj_(store, name + ".in_proj", c.hidden_size, c.in_proj_out(), false, tp_split::row_segments,
               c.init_method_std, tp_size, c.sequence_parallel, c.fp8),
      out_proj_(store, name + ".out_proj", c.d_inner(), c.hidden_size, false,
                c.init_method_std / std::sqrt(double(c.num_layers)), tp_size, c.sequence_parallel, c.fp8) {
  if (c.heads() % c.num_groups != 0)
    throw std::invalid_argument("--mamba-num-heads must be divisible by --mamba-num-groups");
  const std::int64_t di = c.d_inner(), gn = std::int64_t(c.num_groups) * c.state_dim;
  store[in_proj_.weight_id()].segments = {di, di, gn, gn, c.heads()};
  store[conv_weight_].segments = store[conv_bias_].segments = {di, gn, gn};
}

void mamba_mixer::initialize(parameter_store& store, std::uint64_t seed, int tp_rank) const {
  std::mt19937_64 rng(seed ^ std::hash<std::string>{}(store[A_log_].name));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int H = c_.heads();
  std::vector<double> A_log(H), dt_bias(H);
  for (int h = 0; h < H; ++h) {
    A_log[h] = std::log(1.0 + 15.0 * unit(rng));
    const double lo = std::log(0.001), hi = std::log(0.1);
    const double dt = std::max(std::exp(lo + unit(rng) * (hi - lo)), 1e-4);
    dt_bias[h] = dt + std::log(-std::expm1(-dt));  // softplus(dt_bias) = dt
  }
  const double bound = 1.0 / std::sqrt(double(c_.conv_width));
  std::vector<double> w(std::size_t(c_.conv_dim()) * c_.conv_width), b(c_.conv_dim());
  for (auto* v : {&w, &b})
    for (auto& e : *v) e = bound * (2 * unit(rng) - 1);
  // Drawn whole on every rank; each keeps its own heads and channels.
  const std::int64_t di = c_.d_inner(), gn = std::int64_t(c_.num_groups) * c_.state_dim;
  A_log = shard_of(A_log, {H}, 1, tp_rank, tp_), dt_bias = shard_of(dt_bias, {H}, 1, tp_rank, tp_);
  w = shard_of(w, {di, gn, gn}, c_.conv_width, tp_rank, tp_), b = shard_of(b, {di, gn, gn}, 1, tp_rank, tp_);
  auto put = [&](int id, std::vector<double>& v) {
    store.set_initial_values(id, tensor::const_tensor_view{v.data(), {std::int64_t(v.size())}, tensor::dtype::float64,
                                                           tensor::cpu});
  };
  put(A_log_, A_log), put(dt_bias_, dt_bias), put(conv_weight_, w), put(conv_bias_, b);
}

kernels::ssd_shape mamba_mixer::shape() const {
  return {.batch = batch_, .seq = scan_seq_, .heads = cp_.heads(), .head_dim = c_.head_dim,
          .groups = cp_.groups(), .state = c_.state_dim, .chunk = c_.chunk_size};
}

void mamba_mixer::scan_inputs_from_conv(tensor::dtype type) {
  const int rows = scan_seq_ * batch_, di = cp_.d_inner(), gn = cp_.groups() * c_.state_dim;
  const int cd = cp_.conv_dim();
  auto x = ensure_activation(x_, rows, di, type), B = ensure_activation(B_, rows, gn, type);
  auto C = ensure_activation(C_, rows, gn, type);
  copy_columns(x, {bs, di, 0}, xbc_act_, {bs, cd, 0}, di, scan_seq_, batch_);
  copy_columns(B, {bs, gn, 0}, xbc_act_, {bs, cd, di}, gn, scan_seq_, batch_);
  copy_columns(C, {bs, gn, 0}, xbc_act_, {bs, cd, di + gn}, gn, scan_seq_, batch_);
}

tensor::const_tensor_view mamba_mixer::conv_weight(const parameter_store& store) const {
  return cp_.active() ? conv_weight_cp_.view() : store.value(conv_weight_);
}

tensor::const_tensor_view mamba_mixer::conv_bias(const parameter_store& store) const {
  return cp_.active() ? conv_bias_cp_.view() : store.value(conv_bias_);
}

// in_proj's columns z | x | B | C | dt; the scan's xbc_ holds x | B | C of its share.
void mamba_mixer::exchange_to_heads(tensor::const_tensor_view zxbcdt) {
  const int di = d_inner(), gn = groups() * c_.state_dim, io = in_proj_out(), rows = seq_ * batch_;
  const int sdi = cp_.d_inner(), sgn = cp_.groups() * c_.state_dim, scd = cp_.conv_dim();
  const int srows = scan_seq_ * batch_;
  const auto type = zxbcdt.type;
  auto xbc = ensure_activation(xbc_, srows, scd, type);
  auto dt = ensure_activation(dt_, srows, cp_.heads(), type);
  const auto move = [&](part kind, int column, int width, int scan_width, tensor::tensor_view to, int to_column) {
    tensor::tensor local({rows, width}, type, tensor::memory_kind::activations, zxbcdt.where);
    tensor::tensor whole({srows, scan_width}, type, tensor::memory_kind::activations, zxbcdt.where);
    copy_columns(local.view(), {sb, width, 0}, zxbcdt, {sb, io, column}, width, seq_, batch_);
    cp_.to_heads(kind, batch_, local.view(), whole.view());
    copy_columns(to, {bs, int(to.numel() / srows), to_column}, whole.view(), {sb, scan_width, 0}, scan_width,
                 scan_seq_, batch_);
  };
  move(part::x, di, di, sdi, xbc, 0);
  move(part::bc, 2 * di, gn, sgn, xbc, sdi);
  move(part::bc, 2 * di + gn, gn, sgn, xbc, sdi + sgn);
  move(part::dt, 2 * di + 2 * gn, heads(), cp_.heads(), dt, 0);
}

void mamba_mixer::exchange_grads_to_sequence(tensor::tensor_view dzxbcdt, tensor::const_tensor_view dxbc,
                                             tensor::const_tensor_view ddt) {
  const int di = d_inner(), gn = groups() * c_.state_dim, io = in_proj_out(), rows = seq_ * batch_;
  const int sdi = cp_.d_inner(), sgn = cp_.groups() * c_.state_dim;
  const int srows = scan_seq_ * batch_;
  const auto type = dzxbcdt.type;
  const auto move = [&](part kind, tensor::const_tensor_view from, int from_column, int scan_width, int width,
                        int column) {
    tensor::tensor whole({srows, scan_width}, type, tensor::memory_kind::activations, dzxbcdt.where);
    tensor::tensor local({rows, width}, type, tensor::memory_kind::activations, dzxbcdt.where);
    copy_columns(whole.view(), {sb, scan_width, 0}, from, {bs, int(from.numel() / srows), from_column}, scan_width,
                 scan_seq_, batch_);
    cp_.to_sequence(kind, batch_, whole.view(), local.view());
    copy_columns(dzxbcdt, {sb, io, column}, local.view(), {sb, width, 0}, width, seq_, batch_);
  };
  move(part::x, dxbc, 0, sdi, di, di);
  move(part::bc, dxbc, sdi, sgn, gn, 2 * di);
  move(part::bc, dxbc, sdi + sgn, sgn, gn, 2 * di + gn);
  move(part::dt, ddt, 0, cp_.heads(), heads(), 2 * di + 2 * gn);
}

// y (forward) or dy (backward) between this rank's positions of every head, [batch, seq] rows of
// the layer's share, and the whole sequence of the scan's heads, [batch, whole seq] rows.
void mamba_mixer::move_y(bool to_heads, tensor::const_tensor_view from, tensor::tensor_view to) {
  const int di = d_inner(), sdi = cp_.d_inner(), rows = seq_ * batch_, srows = scan_seq_ * batch_;
  tensor::tensor local({rows, di}, from.type, tensor::memory_kind::activations, from.where);
  tensor::tensor whole({srows, sdi}, from.type, tensor::memory_kind::activations, from.where);
  if (to_heads) {
    copy_columns(local.view(), {sb, di, 0}, from, {bs, di, 0}, di, seq_, batch_);
    cp_.to_heads(part::x, batch_, local.view(), whole.view());
    copy_columns(to, {bs, sdi, 0}, whole.view(), {sb, sdi, 0}, sdi, scan_seq_, batch_);
  } else {
    copy_columns(whole.view(), {sb, sdi, 0}, from, {bs, sdi, 0}, sdi, scan_seq_, batch_);
    cp_.to_sequence(part::x, batch_, whole.view(), local.view());
    copy_columns(to, {bs, di, 0}, local.view(), {sb, di, 0}, di, seq_, batch_);
  }
}

void mamba_mixer::forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                          tensor::tensor_view out, int seq, int batch) {
  seq_ = seq, batch_ = batch, scan_seq_ = cp_.scan_seq(seq);
  const int rows = seq * batch, di = d_inner(), cd = conv_dim(), H = heads();
  const int io = in_proj_out(), srows = scan_seq_ * batch, scd = cp_.conv_dim();
  const auto type = x.type;
  auto zxbcdt = ensure_activation(zxbcdt_, rows, io, type);
  in_proj_.forward(store, tp, x, zxbcdt, rows);
  auto z = ensure_activation(z_, rows, di, type);
  copy_columns(z, {bs, di, 0}, zxbcdt, {sb, io, 0}, di, seq, batch);
  if (cp_.active()) {
    exchange_to_heads(zxbcdt);
    const auto& w = store.value(conv_weight_);
    cp_.gather_conv_rows(w, ensure_activation(conv_weight_cp_, scd, c_.conv_width, w.type), c_.conv_width);
    cp_.gather_conv_rows(store.value(conv_bias_), ensure_activation(conv_bias_cp_, scd, 1, w.type), 1);
  } else {
    auto xbc = ensure_activation(xbc_, rows, cd, type), dt = ensure_activation(dt_, rows, H, type);
    copy_columns(xbc, {bs, cd, 0}, zxbcdt, {sb, io, di}, cd, seq, batch);
    copy_columns(dt, {bs, H, 0}, zxbcdt, {sb, io, di + cd}, H, seq, batch);
  }
  auto act = ensure_activation(xbc_act_, srows, scd, type);
  kernels::causal_conv1d_forward(act, xbc_, conv_weight(store), conv_bias(store), batch, scan_seq_, scd,
                                 c_.conv_width, true);
  scan_inputs_from_conv(type);
  const auto s = shape();
  auto y = ensure_activation(y_, rows, di, type);
  auto states = ensure_activation(states_, s.states_size(), 1, type);
  tensor::tensor y_heads;
  auto scan_y = cp_.active() ? ensure_activation(y_heads, srows, cp_.d_inner(), type) : y;
  kernels::ssd_scan_forward(scan_y, states, x_, dt_, head_slice(store.value(A_log_)), B_, C_,
                            head_slice(store.value(D_)), head_slice(store.value(dt_bias_)), s);
  if (cp_.active()) move_y(false, scan_y, y);
  const int group_size = di / groups();
  auto rstd = ensure_activation(rstd_, rows, groups(), kernels::compute_dtype(type));
  tensor::tensor normed_bs;
  auto nbs = ensure_activation(normed_bs, rows, di, type);
  kernels::gated_rmsnorm_forward(nbs, rstd, y, z, store.value(norm_weight_), rows, di,
                                 group_size, c_.norm_epsilon);
  auto normed = ensure_activation(normed_, rows, di, type);
  copy_columns(normed, {sb, di, 0}, nbs, {bs, di, 0}, di, seq, batch);
  out_proj_.forward(store, tp, normed, out, rows);
}

void mamba_mixer::backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                           tensor::const_tensor_view x, tensor::tensor_view dx) {
  const int rows = seq_ * batch_, di = d_inner(), cd = conv_dim(), H = heads();
  const int io = in_proj_out(), srows = scan_seq_ * batch_;
  const int sdi = cp_.d_inner(), scd = cp_.conv_dim(), sgn = cp_.groups() * c_.state_dim;
  const auto type = dout.type;
  auto dnormed = ensure_activation(scratch_a_, rows, di, type);
  out_proj_.backward(store, tp, dout, normed_, dnormed, rows);
  auto dn_bs = ensure_activation(scratch_b_, rows, di, type);
  copy_columns(dn_bs, {bs, di, 0}, dnormed, {sb, di, 0}, di, seq_, batch_);
  tensor::tensor dy_t, dz_t, dy_heads_t, dxs_t, ddt_t, dB_t, dC_t, dact_t, dxbc_t;
  auto dy = ensure_activation(dy_t, rows, di, type), dz = ensure_activation(dz_t, rows, di, type);
  gated_norm_backward(store, dn_bs, dy, dz);
  tensor::tensor_view scan_dy = dy;
  if (cp_.active()) {
    scan_dy = ensure_activation(dy_heads_t, srows, sdi, type);
    move_y(true, dy, scan_dy);
  }
  auto dxs = ensure_activation(dxs_t, srows, sdi, type), ddt = ensure_activation(ddt_t, srows, cp_.heads(), type);
  auto dB = ensure_activation(dB_t, srows, sgn, type), dC = ensure_activation(dC_t, srows, sgn, type);
  kernels::ssd_scan_backward(dxs, ddt, head_slice(store.grad(A_log_)), dB, dC, head_slice(store.grad(D_)),
                             head_slice(store.grad(dt_bias_)), scan_dy, states_, x_, dt_,
                             head_slice(store.value(A_log_)), B_, C_, head_slice(store.value(D_)),
                             head_slice(store.value(dt_bias_)), shape());
  auto dact = ensure_activation(dact_t, srows, scd, type);
  copy_columns(dact, {bs, scd, 0}, dxs, {bs, sdi, 0}, sdi, scan_seq_, batch_);
  copy_columns(dact, {bs, scd, sdi}, dB, {bs, sgn, 0}, sgn, scan_seq_, batch_);
  copy_columns(dact, {bs, scd, sdi + sgn}, dC, {bs, sgn, 0}, sgn, scan_seq_, batch_);
  auto dxbc = ensure_activation(dxbc_t, srows, scd, type);
  auto dzxbcdt = ensure_activation(scratch_c_, rows, io, type);
  copy_columns(dzxbcdt, {sb, io, 0}, dz, {bs, di, 0}, di, seq_, batch_);
  conv_backward(store, dact, dxbc);
  if (cp_.active()) {
    exchange_grads_to_sequence(dzxbcdt, dxbc, ddt);
  } else {
    copy_columns(dzxbcdt, {sb, io, di}, dxbc, {bs, cd, 0}, cd, seq_, batch_);
    copy_columns(dzxbcdt, {sb, io, di + cd}, ddt, {bs, H, 0}, H, seq_, batch_);
  }
  in_proj_.backward(store, tp, dzxbcdt, x, dx, rows);
}

// The gated norm's input gradients, and its weight's: at once, or while the store's weight_grads()
// collect (a zero-bubble backward) in the W pass, on copies of what it reads.
void mamba_mixer::gated_norm_backward(parameter_store& store, tensor::const_tensor_view dnormed,
                                      tensor::tensor_view dy, tensor::tensor_view dz) {
  const int rows = seq_ * batch_, di = d_inner(), group_size = di / groups();
  auto& weight_grads = store.weight_grads();
  const bool defer = weight_grads.collecting();
  if (defer)
    weight_grads.add({dnormed, y_, z_, rstd_}, [&store, this, rows, di, group_size](auto in) {
      kernels::gated_rmsnorm_backward({}, {}, store.grad(norm_weight_), in[0], in[1], in[2], store.value(norm_weight_),
                                      in[3], rows, di, group_size);
    });
  kernels::gated_rmsnorm_backward(dy, dz, defer ? tensor::tensor_view{} : store.grad(norm_weight_), dnormed, y_, z_,
                                  store.value(norm_weight_), rstd_, rows, di, group_size);
}

// The depthwise conv's input gradient, and its weight's and bias's: at once, or while the store's
// weight_grads() collect (a zero-bubble backward) in the W pass, on copies of what they read.
void mamba_mixer::conv_backward(parameter_store& store, tensor::const_tensor_view dact, tensor::tensor_view dxbc) {
  const int batch = batch_, seq = cp_.active() ? scan_seq_ : seq_;
  auto& weight_grads = store.weight_grads();
  if (!weight_grads.collecting())
    return conv_gradients(store, dxbc, dact, xbc_, conv_weight(store), conv_bias(store), batch, seq, true);
  weight_grads.add({dact, xbc_, conv_weight(store), conv_bias(store)}, [&store, this, batch, seq](auto in) {
    conv_gradients(store, {}, in[0], in[1], in[2], in[3], batch, seq, true);
  });
  conv_gradients(store, dxbc, dact, xbc_, conv_weight(store), conv_bias(store), batch, seq, false);
}

// dx (when given) and, with `weights`, the conv's weight and bias gradients; under context
// parallelism this rank's channels' gradients are added into the whole parameters' rows.
void mamba_mixer::conv_gradients(parameter_store& store, tensor::tensor_view dx, tensor::const_tensor_view dact,
                                 tensor::const_tensor_view x, tensor::const_tensor_view w,
                                 tensor::const_tensor_view bias, int batch, int seq, bool weights) {
  const int channels = cp_.active() ? cp_.conv_dim() : conv_dim(), width = c_.conv_width;
  if (!weights) return kernels::causal_conv1d_backward(dx, {}, {}, dact, x, w, bias, batch, seq, channels, width, true);
  if (!cp_.active())
    return kernels::causal_conv1d_backward(dx, store.grad(conv_weight_), store.grad(conv_bias_), dact, x, w, bias,
                                           batch, seq, channels, width, true);
  const auto gtype = store.grad(conv_weight_).type;
  const auto where = dact.where;
  tensor::tensor dw({channels, 1, width}, gtype, tensor::memory_kind::activations, where);
  tensor::tensor db({channels}, gtype, tensor::memory_kind::activations, where);
  kernels::causal_conv1d_backward(dx, dw.view(), db.view(), dact, x, w, bias, batch, seq, channels, width, true);
  cp_.add_conv_rows(store.grad(conv_weight_), dw.view(), width);
  cp_.add_conv_rows(store.grad(conv_bias_), db.view(), 1);
}

void mamba_mixer::release() {
  for (auto* t : {&zxbcdt_, &z_, &xbc_, &dt_, &xbc_act_, &x_, &B_, &C_, &states_, &y_, &rstd_,
                  &normed_, &scratch_a_, &scratch_b_, &scratch_c_, &conv_weight_cp_, &conv_bias_cp_})
    *t = tensor::tensor();
  in_proj_.release();
  out_proj_.release();
}

}  // namespace mactor::model
