// The pseudo-device's kernels: check every argument lies in device memory, then run the CPU
// kernel on the same bytes seen as host memory, inside an open window of the arena.
#include "tests/kernels/pseudo_device.hpp"

#include <atomic>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/adam.hpp"
#include "kernels/attention.hpp"
#include "kernels/bias.hpp"
#include "kernels/causal_conv1d.hpp"
#include "kernels/column_copy.hpp"
#include "kernels/convert.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/gated_rmsnorm.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/mla_rope.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/reductions.hpp"
#include "kernels/ring_attention_block.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/sgd.hpp"
#include "kernels/fp8.hpp"
#include "kernels/squared_relu.hpp"
#include "kernels/ssd_scan.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/tensor_ops.hpp"
#include "tests/kernels/pseudo_device_arena.hpp"

namespace mactor::test {

namespace {

namespace k = mactor::kernels;
using view = tensor::tensor_view;
using input = tensor::const_tensor_view;

std::atomic<std::int64_t> calls{0};

// One kernel call: its arguments checked, then the arena open until it ends.
class call {
 public:
  /// Every non-empty view must be on the pseudo-device (any cuda index: one arena stands for
  /// them all), inside one live block.
  call(const char* kernel, std::initializer_list<input> views) : kernel_(kernel) {
    ++calls;
    int i = 0;
    for (const auto& v : views) {
      ++i;
      if (!v.data) continue;
      if (v.where.type != tensor::device_type::cuda || !pseudo::holds(v.data, v.nbytes()))
        fail("view " + std::to_string(i) + " (" + std::string(tensor::short_name(v.type)) + " " +
             tensor::to_string(v.shape) + " on " + tensor::to_string(v.where) +
             ") is not in the device's memory");
    }
  }
  /// n integers read through a pointer (ids, labels, document starts) must be device memory
  /// (null passes: the entry points decide what a null array means).
  const std::int32_t* ints(const std::int32_t* p, std::int64_t n, const char* what) const {
    if (p && n > 0 && !pseudo::holds(p, std::size_t(n) * sizeof(std::int32_t)))
      fail(std::string(what) + " point into host memory (upload them: tensor::index_array)");
    return p;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::logic_error(std::string("pseudo-device: ") + kernel_ + ": " + why);
  }
  const char* kernel_;
  pseudo::open_window window_;
};

// The same bytes as a host view, for the CPU kernel.
view h(view v) {
  v.where = tensor::cpu;
  return v;
}
input h(input v) {
  v.where = tensor::cpu;
  return v;
}

class pseudo_kernels final : public k::device_kernels {
 public:
  void scale(view x, double f) override { call c("scale", {x}); k::scale(h(x), f); }
  void add(view dst, input src) override { call c("add", {dst, src}); k::add(h(dst), h(src)); }
  void copy(view dst, input src) override { call c("copy", {dst, src}); k::copy(h(dst), h(src)); }
  void fill_zero(view x) override { call c("fill_zero", {x}); k::fill_zero(h(x)); }
  void convert(view dst, input src) override { call c("convert", {dst, src}); k::convert(h(dst), h(src)); }
  void round_through(view x, tensor::dtype type) override {
    call c("round_through", {x});
    k::round_through(h(x), type);
  }
  void bias_add(view y, input bias, int n, int w) override {
    call c("bias_add", {y, bias});
    k::bias_add(h(y), h(bias), n, w);
  }
  void bias_backward(view dbias, input dy, int n, int w) override {
    call c("bias_backward", {dbias, dy});
    k::bias_backward(h(dbias), h(dy), n, w);
  }
  void linear_forward(input x, input w, view y, int rows, int in, int out, double beta) override {
    call c("linear_forward", {x, w, y});
    k::linear_forward(h(x), h(w), h(y), rows, in, out, beta);
  }
  void linear_backward_input(input dy, input w, view dx, int rows, int in, int out, double beta) override {
    call c("linear_backward_input", {dy, w, dx});
    k::linear_backward_input(h(dy), h(w), h(dx), rows, in, out, beta);
  }
  void linear_backward_weight(input dy, input x, view dw, int rows, int in, int out) override {
    call c("linear_backward_weight", {dy, x, dw});
    k::linear_backward_weight(h(dy), h(x), h(dw), rows, in, out);
  }
  void rmsnorm_forward(view y, view rstd, input x, input gamma, int n, int hidden, double eps, bool zc) override {
    call c("rmsnorm_forward", {y, rstd, x, gamma});
    k::rmsnorm_forward(h(y), h(rstd), h(x), h(gamma), n, hidden, eps, zc);
  }
  void rmsnorm_backward(view dx, view dgamma, input dy, input x, input gamma, input rstd, int n, int hidden,
                        bool zc, bool accumulate_dx) override {
    call c("rmsnorm_backward", {dx, dgamma, dy, x, gamma, rstd});
    k::rmsnorm_backward(h(dx), h(dgamma), h(dy), h(x), h(gamma), h(rstd), n, hidden, zc, accumulate_dx);
  }
  void layernorm_forward(view y, view mean, view rstd, input x, input gamma, input beta, int n, int hidden,
                         double eps, bool zc) override {
    call c("layernorm_forward", {y, mean, rstd, x, gamma, beta});
    k::layernorm_forward(h(y), h(mean), h(rstd), h(x), h(gamma), h(beta), n, hidden, eps, zc);
  }
  void layernorm_backward(view dx, view dgamma, view dbeta, input dy, input x, input gamma, input mean,
                          input rstd, int n, int hidden, bool zc, bool accumulate_dx) override {
    call c("layernorm_backward", {dx, dgamma, dbeta, dy, x, gamma, mean, rstd});
    k::layernorm_backward(h(dx), h(dgamma), h(dbeta), h(dy), h(x), h(gamma), h(mean), h(rstd), n, hidden, zc,
                          accumulate_dx);
  }
  void gelu_forward(view y, input x, std::int64_t n, bool tanh) override {
    call c("gelu_forward", {y, x});
    k::gelu_forward(h(y), h(x), n, tanh);
  }
  void gelu_backward(view dx, input dy, input x, std::int64_t n, bool tanh) override {
    call c("gelu_backward", {dx, dy, x});
    k::gelu_backward(h(dx), h(dy), h(x), n, tanh);
  }
  void swiglu_forward(view y, input x, int n, int f) override {
    call c("swiglu_forward", {y, x});
    k::swiglu_forward(h(y), h(x), n, f);
  }
  void swiglu_backward(view dx, input dy, input x, int n, int f) override {
    call c("swiglu_backward", {dx, dy, x});
    k::swiglu_backward(h(dx), h(dy), h(x), n, f);
  }
  void squared_relu_forward(view y, input x, std::int64_t n) override {
    call c("squared_relu_forward", {y, x});
    k::squared_relu_forward(h(y), h(x), n);
  }
  void squared_relu_backward(view dx, input dy, input x, std::int64_t n) override {
    call c("squared_relu_backward", {dx, dy, x});
    k::squared_relu_backward(h(dx), h(dy), h(x), n);
  }
  void dropout_apply(view y, input x, std::int64_t n, float p, std::uint64_t stream, std::uint64_t first) override {
    call c("dropout_apply", {y, x});
    k::dropout_apply(h(y), h(x), n, p, stream, first);
  }
  void bias_dropout_add(view out, input residual, input x, input bias, int n, int w, float p, std::uint64_t stream,
                        std::uint64_t first) override {
    call c("bias_dropout_add", {out, residual, x, bias});
    k::bias_dropout_add(h(out), h(residual), h(x), h(bias), n, w, p, stream, first);
  }
  void gather_rows(view out, input in, std::span<const std::int64_t> rows, int w) override {
    call c("gather_rows", {out, in});
    k::gather_rows(h(out), h(in), rows, w);
  }
  void scatter_add_rows(view out, input in, std::span<const std::int64_t> rows, int w) override {
    call c("scatter_add_rows", {out, in});
    k::scatter_add_rows(h(out), h(in), rows, w);
  }
  void scale_rows(view out, input in, input scale, std::int64_t n, int w) override {
    call c("scale_rows", {out, in, scale});
    k::scale_rows(h(out), h(in), h(scale), n, w);
  }
  void row_dots(view out, input a, input b, std::int64_t n, int w) override {
    call c("row_dots", {out, a, b});
    k::row_dots(h(out), h(a), h(b), n, w);
  }
  void attention_forward(view out, view probs, input qkv, const k::attention_dims& dims, double scale, float p,
                         std::uint64_t stream, input sink, input kv) override {
    call c("attention_forward", {out, probs, qkv, sink, kv});
    c.ints(dims.document_start, std::int64_t(dims.batch) * dims.keys(), "the document starts");
    k::attention_forward(h(out), h(probs), h(qkv), dims, scale, p, stream, h(sink), h(kv));
  }
  void attention_backward(view dqkv, input dout, input qkv, input probs, const k::attention_dims& dims,
                          double scale, float p, std::uint64_t stream, input sink, view dsink, input kv,
                          view dkv) override {
    call c("attention_backward", {dqkv, dout, qkv, probs, sink, dsink, kv, dkv});
    c.ints(dims.document_start, std::int64_t(dims.batch) * dims.keys(), "the document starts");
    k::attention_backward(h(dqkv), h(dout), h(qkv), h(probs), dims, scale, p, stream, h(sink), h(dsink), h(kv),
                          h(dkv));
  }
  void ring_block_forward(view m, view l, view o, input qkv, input block, const k::ring_block_dims& r,
                          double scale, float p, std::uint64_t stream) override {
    call c("ring_block_forward", {m, l, o, qkv, block});
    k::ring_block_forward(h(m), h(l), h(o), h(qkv), h(block), r, scale, p, stream);
  }
  void ring_block_backward(view dq, view dblock, input dout, input qkv, input block, input lse, input delta,
                           const k::ring_block_dims& r, double scale, float p, std::uint64_t stream) override {
    call c("ring_block_backward", {dq, dblock, dout, qkv, block, lse, delta});
    k::ring_block_backward(h(dq), h(dblock), h(dout), h(qkv), h(block), h(lse), h(delta), r, scale, p, stream);
  }
  void rope_apply(view x, input cos, input sin, int seq, int batch, int groups, int heads_per_group, int head_dim,
                  int rot_dim, std::int64_t row_stride, std::int64_t group_stride, bool interleaved,
                  bool inverse) override {
    call c("rope_apply", {x, cos, sin});
    k::rope_apply(h(x), h(cos), h(sin), seq, batch, groups, heads_per_group, head_dim, rot_dim, row_stride,
                  group_stride, interleaved, inverse);
  }
  void mla_rope_apply(view x, input cos, input sin, int seq, int batch, int heads, std::int64_t row_stride,
                      std::int64_t head_stride, std::int64_t offset, int rot_dim, bool inverse) override {
    call c("mla_rope_apply", {x, cos, sin});
    k::mla_rope_apply(h(x), h(cos), h(sin), seq, batch, heads, row_stride, head_stride, offset, rot_dim, inverse);
  }
  void embedding_forward(view out, input table, const std::int32_t* ids, int n, int hidden, int vocab_start,
                         int vocab_end, double beta) override {
    call c("embedding_forward", {out, table});
    k::embedding_forward(h(out), h(table), c.ints(ids, n, "the token ids"), n, hidden, vocab_start, vocab_end,
                         beta);
  }
  void embedding_backward(view dtable, input dout, const std::int32_t* ids, int n, int hidden, int vocab_start,
                          int vocab_end) override {
    call c("embedding_backward", {dtable, dout});
    k::embedding_backward(h(dtable), h(dout), c.ints(ids, n, "the token ids"), n, hidden, vocab_start, vocab_end);
  }
  void cross_entropy_row_max(view row_max, input logits, int n, int v) override {
    call c("cross_entropy_row_max", {row_max, logits});
    k::cross_entropy_row_max(h(row_max), h(logits), n, v);
  }
  void cross_entropy_shard_sums(view sum_exp, view target, view logits, input row_max, const std::int32_t* labels,
                                int n, int v, int vocab_start) override {
    call c("cross_entropy_shard_sums", {sum_exp, target, logits, row_max});
    k::cross_entropy_shard_sums(h(sum_exp), h(target), h(logits), h(row_max), c.ints(labels, n, "the labels"), n, v,
                                vocab_start);
  }
  void cross_entropy_loss(view loss, input sum_exp, input row_max, input target, int n) override {
    call c("cross_entropy_loss", {loss, sum_exp, row_max, target});
    k::cross_entropy_loss(h(loss), h(sum_exp), h(row_max), h(target), n);
  }
  void cross_entropy_backward(view exps, input sum_exp, const std::int32_t* labels, input grad_scale, int n, int v,
                              int vocab_start) override {
    call c("cross_entropy_backward", {exps, sum_exp, grad_scale});
    k::cross_entropy_backward(h(exps), h(sum_exp), c.ints(labels, n, "the labels"), h(grad_scale), n, v,
                              vocab_start);
  }
  void adam_step(view value, input grad, view exp_avg, view exp_avg_sq, const k::adam_hyperparameters& hp) override {
    call c("adam_step", {value, grad, exp_avg, exp_avg_sq});
    k::adam_step(h(value), h(grad), h(exp_avg), h(exp_avg_sq), hp);
  }
  double sum_of_squares(input x) override {
    call c("sum_of_squares", {x});
    return k::sum_of_squares(h(x));
  }
  double count_zeros(input x) override {
    call c("count_zeros", {x});
    return k::count_zeros(h(x));
  }
  void copy_columns(view dst, k::column_block to, input src, k::column_block from, int columns, int seq,
                    int batch) override {
    call c("copy_columns", {dst, src});
    k::copy_columns(h(dst), to, h(src), from, columns, seq, batch);
  }
  void causal_conv1d_forward(view y, input x, input w, input bias, int batch, int seq, int channels, int width,
                             bool silu) override {
    call c("causal_conv1d_forward", {y, x, w, bias});
    k::causal_conv1d_forward(h(y), h(x), h(w), h(bias), batch, seq, channels, width, silu);
  }
  void causal_conv1d_backward(view dx, view dw, view dbias, input dy, input x, input w, input bias, int batch, int seq,
                              int channels, int width, bool silu) override {
    call c("causal_conv1d_backward", {dx, dw, dbias, dy, x, w, bias});
    k::causal_conv1d_backward(h(dx), h(dw), h(dbias), h(dy), h(x), h(w), h(bias), batch, seq, channels, width, silu);
  }
  void gated_rmsnorm_forward(view y, view rstd, input x, input z, input weight, int n, int d, int group_size,
                             double eps) override {
    call c("gated_rmsnorm_forward", {y, rstd, x, z, weight});
    k::gated_rmsnorm_forward(h(y), h(rstd), h(x), h(z), h(weight), n, d, group_size, eps);
  }
  void gated_rmsnorm_backward(view dx, view dz, view dweight, input dy, input x, input z, input weight, input rstd,
                              int n, int d, int group_size) override {
    call c("gated_rmsnorm_backward", {dx, dz, dweight, dy, x, z, weight, rstd});
    k::gated_rmsnorm_backward(h(dx), h(dz), h(dweight), h(dy), h(x), h(z), h(weight), h(rstd), n, d, group_size);
  }
  void ssd_scan_forward(view y, view states, input x, input dt_raw, input A_log, input B, input C, input D,
                        input dt_bias, const k::ssd_shape& s) override {
    call c("ssd_scan_forward", {y, states, x, dt_raw, A_log, B, C, D, dt_bias});
    k::ssd_scan_forward(h(y), h(states), h(x), h(dt_raw), h(A_log), h(B), h(C), h(D), h(dt_bias), s);
  }
  void ssd_scan_backward(view dx, view ddt_raw, view dA_log, view dB, view dC, view dD, view ddt_bias, input dy,
                         input states, input x, input dt_raw, input A_log, input B, input C, input D, input dt_bias,
                         const k::ssd_shape& s) override {
    call c("ssd_scan_backward", {dx, ddt_raw, dA_log, dB, dC, dD, ddt_bias, dy, states, x, dt_raw, A_log, B, C, D, dt_bias});
    k::ssd_scan_backward(h(dx), h(ddt_raw), h(dA_log), h(dB), h(dC), h(dD), h(ddt_bias), h(dy), h(states), h(x),
                         h(dt_raw), h(A_log), h(B), h(C), h(D), h(dt_bias), s);
  }
  void sgd_step(view value, input grad, view buf, const k::sgd_hyperparameters& hp) override {
    call c("sgd_step", {value, grad, buf});
    k::sgd_step(h(value), h(grad), h(buf), hp);
  }
  float amax(input x) override {
    call c("amax", {x});
    return k::amax(h(x));
  }
  void round_through_fp8(view out, input x, float scale, float scale_inv, k::fp8_type t) override {
    call c("round_through_fp8", {out, x});
    k::round_through_fp8(h(out), h(x), scale, scale_inv, t);
  }
  void round_through_fp8_blocks(view out, input x, int rows, int cols, int block_rows, int block_cols,
                                k::block_scale_rule rule, k::fp8_type t) override {
    call c("round_through_fp8_blocks", {out, x});
    k::round_through_fp8_blocks(h(out), h(x), rows, cols, block_rows, block_cols, rule, t);
  }
};

pseudo_kernels the_kernels;

}  // namespace

pseudo_device::pseudo_device() {
  pseudo::install_memory();
  k::register_device_kernels(tensor::device_type::cuda, &the_kernels);
}

pseudo_device::~pseudo_device() { k::register_device_kernels(tensor::device_type::cuda, nullptr); }

std::int64_t pseudo_device::kernel_calls() const { return calls.load(); }

std::size_t pseudo_device::live_bytes() const { return pseudo::live_bytes(); }

}  // namespace mactor::test
