// The CUDA device_kernels: each entry point's views unpacked into the device kernels' pointers.
#include "kernels/cuda/tensor_kernels.hpp"

#include <cuda_runtime_api.h>

#include "kernels/cuda/activations.hpp"
#include "kernels/cuda/adam.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/bias.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/device_stage.hpp"
#include "kernels/cuda/dropout.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/fp8.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/mamba.hpp"
#include "kernels/cuda/mla_rope.hpp"
#include "kernels/cuda/moe_permute.hpp"
#include "kernels/cuda/reductions.hpp"
#include "kernels/cuda/ring_attention_block.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rope.hpp"
#include "kernels/cuda/sgd.hpp"
#include "kernels/cuda/squared_relu.hpp"
#include "kernels/cuda/tensor_ops.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/ssd_scan.hpp"
#include "tensor/transfer.hpp"
#include "tensor/cuda/copy.hpp"
#include "tensor/cuda/current_stream.hpp"
#include "tensor/cuda/device.hpp"
#include "tensor/cuda/device_allocator.hpp"
#include "tensor/cuda/device_tensors.hpp"

namespace mactor::kernels::cuda {

namespace {

using tensor::dtype;

stream_handle current() { return mactor::cuda::current_stream(); }

// A kernel with no CUDA version yet, run by the CPU's on host copies of its views: every view
// comes down (outputs too, for those the kernel accumulates into), and finish() puts the outputs
// back up. The copies wait for the stream, so the kernel sees what was queued before it.
class host_detour {
 public:
  tensor::const_tensor_view in(tensor::const_tensor_view v) {
    if (!v.data) return {};
    held_.push_back(tensor::copy_to(v, tensor::cpu, tensor::memory_kind::other));
    return held_.back().view();
  }
  tensor::tensor_view out(tensor::tensor_view v) {
    if (!v.data) return {};
    held_.push_back(tensor::copy_to(v, tensor::cpu, tensor::memory_kind::other));
    outputs_.emplace_back(v, held_.size() - 1);
    return held_.back().view();
  }
  void finish() {
    for (const auto& [device_view, i] : outputs_) tensor::copy_between(device_view, held_[i].view());
  }

 private:
  std::vector<tensor::tensor> held_;  // a tensor's bytes stay put when the vector grows
  std::vector<std::pair<tensor::tensor_view, std::size_t>> outputs_;
};

// One GEMM of the linears: bf16 operands through cuBLASLt's bf16 GEMM into a bf16 c, or into an
// fp32 c (a weight gradient into fp32 main grads); anything else in fp32, 16-bit operands staged.
void linear_gemm(const char* kernel, bool ta, bool tb, int m, int n, int k, tensor::const_tensor_view a, int lda,
                 tensor::const_tensor_view b, int ldb, double beta, tensor::tensor_view c, int ldc) {
  if (a.type == dtype::bfloat16 && b.type == dtype::bfloat16) {
    const auto* a16 = static_cast<const tensor::bfloat16*>(a.data);
    const auto* b16 = static_cast<const tensor::bfloat16*>(b.data);
    if (c.type == dtype::bfloat16)
      return gemm(ta, tb, m, n, k, 1.f, a16, lda, b16, ldb, float(beta), static_cast<tensor::bfloat16*>(c.data), ldc,
                  current());
    if (c.type == dtype::float32)
      return gemm(ta, tb, m, n, k, 1.f, a16, lda, b16, ldb, float(beta), static_cast<float*>(c.data), ldc, current());
  }
  device_stage stage(kernel);
  gemm(ta, tb, m, n, k, 1.f, stage.f32(a), lda, stage.f32(b), ldb, float(beta), stage.f32(c), ldc, current());
}

// Host row indices on device `index` (8 bytes each, carried in an fp64 buffer); the copy is queued
// on the current stream before the kernel that reads them, and the host span outlives the call.
mactor::cuda::device_buffer upload(std::span<const std::int64_t> rows, int index) {
  const auto n = std::int64_t(rows.size());
  mactor::cuda::device_buffer d({n}, dtype::float64, index);
  mactor::cuda::copy(d.view(), tensor::const_tensor_view{rows.data(), {n}, dtype::float64}, current());
  return d;
}

class cuda_tensor_kernels final : public device_kernels {
 public:
  void scale(view x, double factor) override {
    device_stage k("scale");
    cuda::scale(k.f32(x), x.numel(), float(factor), current());
  }
  void add(view dst, input src) override {
    device_stage k("add");
    cuda::add(k.f32(dst), k.f32(src), dst.numel(), current());
  }
  void copy(view dst, input src) override {
    if (src.where != dst.where) throw unsupported_kernel("copy (between devices)", dst.type, dst.where);
    mactor::cuda::detail::check(cudaMemcpyAsync(dst.data, src.data, dst.nbytes(), cudaMemcpyDeviceToDevice, current()),
                                "cudaMemcpyAsync (kernels::copy)");
  }
  void fill_zero(view x) override {
    mactor::cuda::detail::check(cudaMemsetAsync(x.data, 0, x.nbytes(), current()), "cudaMemsetAsync (kernels::fill_zero)");
  }

  // Same dtype: the bytes; to or from fp32: one conversion; between the 16-bit types through fp32.
  void convert(view dst, input src) override {
    if (dst.type == src.type) return copy(dst, src);
    if (src.type == dtype::float32) return round_into("convert", dst, static_cast<const float*>(src.data));
    if (dst.type == dtype::float32) return widen_into("convert", static_cast<float*>(dst.data), src);
    device_stage k("convert");
    round_into("convert", dst, k.f32(src));
  }
  // x (fp32) holds exactly the values a tensor of `type` would: rounded to it and widened back.
  void round_through(view x, tensor::dtype type) override {
    if (x.type != dtype::float32) throw unsupported_kernel("round_through", x.type, x.where);
    mactor::cuda::device_buffer rounded({x.numel()}, type, x.where.index);
    round_into("round_through", rounded.view(), static_cast<const float*>(x.data));
    widen_into("round_through", static_cast<float*>(x.data), rounded.view());
  }

  void bias_add(view y, input bias, int n, int w) override {
    device_stage k("bias_add");
    cuda::bias_add(k.f32(y), k.f32(bias), n, w, current());
  }
  void bias_backward(view dbias, input dy, int n, int w) override {
    device_stage k("bias_backward");
    cuda::bias_backward(k.f32(dbias), k.f32(dy), n, w, current());
  }

  void linear_forward(input x, input w, view y, int rows, int in, int out, double beta) override {
    linear_gemm("linear_forward", false, true, rows, out, in, x, in, w, in, beta, y, out);
  }
  void linear_backward_input(input dy, input w, view dx, int rows, int in, int out, double beta) override {
    linear_gemm("linear_backward_input", false, false, rows, in, out, dy, out, w, in, beta, dx, in);
  }
  void linear_backward_weight(input dy, input x, view dw, int rows, int in, int out) override {
    linear_gemm("linear_backward_weight", true, false, out, in, rows, dy, out, x, in, 1.0, dw, in);
  }

  void rmsnorm_forward(view y, view rstd, input x, input gamma, int n, int h, double eps, bool zc) override {
    device_stage k("rmsnorm_forward");
    cuda::rmsnorm_forward(k.f32(y), k.f32(rstd), k.f32(x), k.f32(gamma), n, h, float(eps), zc, current());
  }
  void rmsnorm_backward(view dx, view dgamma, input dy, input x, input gamma, input rstd, int n, int h, bool zc,
                        bool accumulate_dx) override {
    device_stage k("rmsnorm_backward");
    cuda::rmsnorm_backward(k.f32(dx), k.f32(dgamma), k.f32(dy), k.f32(x), k.f32(gamma), k.f32(rstd), n, h, zc,
                           accumulate_dx, current());
  }
  void layernorm_forward(view y, view mean, view rstd, input x, input gamma, input beta, int n, int h, double eps,
                         bool zc) override {
    device_stage k("layernorm_forward");
    cuda::layernorm_forward(k.f32(y), k.f32(mean), k.f32(rstd), k.f32(x), k.f32(gamma), k.f32(beta), n, h,
                            float(eps), zc, current());
  }
  void layernorm_backward(view dx, view dgamma, view dbeta, input dy, input x, input gamma, input mean, input rstd,
                          int n, int h, bool zc, bool accumulate_dx) override {
    device_stage k("layernorm_backward");
    cuda::layernorm_backward(k.f32(dx), k.f32(dgamma), k.f32(dbeta), k.f32(dy), k.f32(x), k.f32(gamma),
                             k.f32(mean), k.f32(rstd), n, h, zc, accumulate_dx, current());
  }

  void gelu_forward(view y, input x, std::int64_t n, bool tanh_form) override {
    device_stage k("gelu_forward");
    cuda::gelu_forward(k.f32(y), k.f32(x), n, tanh_form, current());
  }
  void gelu_backward(view dx, input dy, input x, std::int64_t n, bool tanh_form) override {
    device_stage k("gelu_backward");
    cuda::gelu_backward(k.f32(dx), k.f32(dy), k.f32(x), n, tanh_form, current());
  }
  void swiglu_forward(view y, input x, int n, int f) override {
    device_stage k("swiglu_forward");
    cuda::swiglu_forward(k.f32(y), k.f32(x), n, f, current());
  }
  void swiglu_backward(view dx, input dy, input x, int n, int f) override {
    device_stage k("swiglu_backward");
    cuda::swiglu_backward(k.f32(dx), k.f32(dy), k.f32(x), n, f, current());
  }
  void squared_relu_forward(view y, input x, std::int64_t n) override {
    device_stage k("squared_relu_forward");
    cuda::squared_relu_forward(k.f32(y), k.f32(x), n, current());
  }
  void squared_relu_backward(view dx, input dy, input x, std::int64_t n) override {
    device_stage k("squared_relu_backward");
    cuda::squared_relu_backward(k.f32(dx), k.f32(dy), k.f32(x), n, current());
  }

  void dropout_apply(view y, input x, std::int64_t n, float p, std::uint64_t stream, std::uint64_t first) override {
    device_stage k("dropout_apply");
    cuda::dropout_apply(k.f32(y), k.f32(x), n, p, stream, first, current());
  }
  void bias_dropout_add(view out, input residual, input x, input bias, int n, int w, float p, std::uint64_t stream,
                        std::uint64_t first) override {
    device_stage k("bias_dropout_add");
    cuda::bias_dropout_add(k.f32(out), k.f32(residual), k.f32(x), k.f32(bias), n, w, p, stream, first, current());
  }

  void gather_rows(view out, input in, std::span<const std::int64_t> rows, int w) override {
    device_stage k("gather_rows");
    const auto on_device = upload(rows, out.where.index);
    cuda::gather_rows(k.f32(out), k.f32(in), on_device.as<std::int64_t>(), std::int64_t(rows.size()), w, current());
  }
  void scatter_add_rows(view out, input in, std::span<const std::int64_t> rows, int w) override {
    device_stage k("scatter_add_rows");
    const auto on_device = upload(rows, out.where.index);
    cuda::scatter_add_rows(k.f32(out), k.f32(in), on_device.as<std::int64_t>(), std::int64_t(rows.size()), w,
                           current());
  }
  void scale_rows(view out, input in, input scale, std::int64_t n, int w) override {
    device_stage k("scale_rows");
    cuda::scale_rows(k.f32(out), k.f32(in), k.f32(scale), n, w, current());
  }
  void row_dots(view out, input a, input b, std::int64_t n, int w) override {
    device_stage k("row_dots");
    cuda::row_dots(k.f32(out), k.f32(a), k.f32(b), n, w, current());
  }

  void attention_forward(view out, view probs, input qkv, const attention_dims& dims, double scale, float p,
                         std::uint64_t stream, input sink, input kv) override {
    device_stage k("attention_forward");
    cuda::attention_forward(k.f32(out), k.f32(probs), k.f32(qkv), dims, float(scale), p, stream, k.f32(sink),
                            k.f32(kv), current());
  }
  void attention_backward(view dqkv, input dout, input qkv, input probs, const attention_dims& dims, double scale,
                          float p, std::uint64_t stream, input sink, view dsink, input kv, view dkv) override {
    device_stage k("attention_backward");
    // Freed when this returns, before the kernels ran: safe on the device's one compute stream
    // (tensor/cuda/device_tensors.hpp), where the next use of the block queues after them.
    mactor::cuda::device_buffer scratch({cuda::attention_backward_scratch(dims)}, dtype::float32, dqkv.where.index);
    cuda::attention_backward(k.f32(dqkv), k.f32(dout), k.f32(qkv), k.f32(probs), dims, float(scale), p, stream,
                             scratch.as<float>(), k.f32(sink), k.f32(dsink), k.f32(kv), k.f32(dkv), current());
  }

  void ring_block_forward(view m, view l, view o, input qkv, input block, const ring_block_dims& r, double scale,
                          float p, std::uint64_t stream) override {
    device_stage k("ring_block_forward");
    cuda::ring_block_forward(k.f32(m), k.f32(l), k.f32(o), k.f32(qkv), k.f32(block), r, float(scale), p, stream,
                             current());
  }
  void ring_block_backward(view dq, view dblock, input dout, input qkv, input block, input lse, input delta,
                           const ring_block_dims& r, double scale, float p, std::uint64_t stream) override {
    device_stage k("ring_block_backward");
    cuda::ring_block_backward(k.f32(dq), k.f32(dblock), k.f32(dout), k.f32(qkv), k.f32(block), k.f32(lse),
                              k.f32(delta), r, float(scale), p, stream, current());
  }

  void rope_apply(view x, input cos, input sin, int seq, int batch, int groups, int heads_per_group, int head_dim,
                  int rot_dim, std::int64_t row_stride, std::int64_t group_stride, bool interleaved,
                  bool inverse) override {
    device_stage k("rope_apply");
    cuda::rope_apply(k.f32(x), k.f32(cos), k.f32(sin), seq, batch, groups, heads_per_group, head_dim, rot_dim,
                     row_stride, group_stride, interleaved, inverse, current());
  }

  void mla_rope_apply(view x, input cos, input sin, int seq, int batch, int heads, std::int64_t row_stride,
                      std::int64_t head_stride, std::int64_t offset, int rot_dim, bool inverse) override {
    device_stage k("mla_rope_apply");
    cuda::mla_rope_apply(k.f32(x), k.f32(cos), k.f32(sin), seq, batch, heads, row_stride, head_stride, offset, rot_dim,
                         inverse, current());
  }

  void embedding_forward(view out, input table, const std::int32_t* ids, int n, int hidden, int vocab_start,
                         int vocab_end, double beta) override {
    device_stage k("embedding_forward");
    cuda::embedding_forward(k.f32(out), k.f32(table), ids, n, hidden, vocab_start, vocab_end, float(beta),
                            current());
  }
  void embedding_backward(view dtable, input dout, const std::int32_t* ids, int n, int hidden, int vocab_start,
                          int vocab_end) override {
    device_stage k("embedding_backward");
    cuda::embedding_backward(k.f32(dtable), k.f32(dout), ids, n, hidden, vocab_start, vocab_end, current());
  }

  void cross_entropy_row_max(view row_max, input logits, int n, int v) override {
    device_stage k("cross_entropy_row_max");
    cuda::cross_entropy_row_max(k.f32(row_max), k.f32(logits), n, v, current());
  }
  void cross_entropy_shard_sums(view sum_exp, view target_logit, view logits, input row_max,
                                const std::int32_t* labels, int n, int v, int vocab_start) override {
    device_stage k("cross_entropy_shard_sums");
    cuda::cross_entropy_shard_sums(k.f32(sum_exp), k.f32(target_logit), k.f32(logits), k.f32(row_max), labels, n,
                                   v, vocab_start, current());
  }
  void cross_entropy_loss(view loss, input sum_exp, input row_max, input target_logit, int n) override {
    device_stage k("cross_entropy_loss");
    cuda::cross_entropy_loss(k.f32(loss), k.f32(sum_exp), k.f32(row_max), k.f32(target_logit), n, current());
  }
  void cross_entropy_backward(view exps, input sum_exp, const std::int32_t* labels, input grad_scale, int n, int v,
                              int vocab_start) override {
    device_stage k("cross_entropy_backward");
    cuda::cross_entropy_backward(k.f32(exps), k.f32(sum_exp), labels, k.f32(grad_scale), n, v, vocab_start,
                                 current());
  }

  void adam_step(view value, input grad, view exp_avg, view exp_avg_sq, const adam_hyperparameters& h) override {
    const adam_tensor t{static_cast<float*>(value.data), static_cast<const float*>(grad.data),
                        static_cast<float*>(exp_avg.data), static_cast<float*>(exp_avg_sq.data), value.numel()};
    cuda::adam_step({&t, 1}, h, current());
  }
  void copy_columns(view dst, column_block to, input src, column_block from, int columns, int seq,
                    int batch) override {
    const auto side = [](column_block c) {
      return cuda::column_side{c.width, c.first_column, c.order == row_order::batch_seq};
    };
    cuda::copy_columns(dst.data, side(to), src.data, side(from), tensor::size_of(dst.type), columns, seq, batch,
                       current());
  }
  void causal_conv1d_forward(view y, input x, input w, input bias, int batch, int seq, int channels, int width,
                             bool silu) override {
    device_stage k("causal_conv1d_forward");
    cuda::causal_conv1d_forward(k.f32(y), k.f32(x), k.f32(w), k.f32(bias), batch, seq, channels, width, silu,
                                current());
  }
  void causal_conv1d_backward(view dx, view dw, view dbias, input dy, input x, input w, input bias, int batch, int seq,
                              int channels, int width, bool silu) override {
    device_stage k("causal_conv1d_backward");
    // Freed when this returns, before the kernels ran: safe on the device's one compute stream.
    mactor::cuda::device_buffer dpre({std::int64_t(batch) * seq * channels}, dtype::float32, dy.where.index);
    cuda::causal_conv1d_backward(k.f32(dx), k.f32(dw), k.f32(dbias), k.f32(dy), k.f32(x), k.f32(w), k.f32(bias),
                                 dpre.as<float>(), batch, seq, channels, width, silu, current());
  }
  void gated_rmsnorm_forward(view y, view rstd, input x, input z, input weight, int n, int d, int group_size,
                             double eps) override {
    device_stage k("gated_rmsnorm_forward");
    cuda::gated_rmsnorm_forward(k.f32(y), k.f32(rstd), k.f32(x), k.f32(z), k.f32(weight), n, d, group_size,
                                float(eps), current());
  }
  void gated_rmsnorm_backward(view dx, view dz, view dweight, input dy, input x, input z, input weight, input rstd,
                              int n, int d, int group_size) override {
    device_stage k("gated_rmsnorm_backward");
    cuda::gated_rmsnorm_backward(k.f32(dx), k.f32(dz), k.f32(dweight), k.f32(dy), k.f32(x), k.f32(z), k.f32(weight),
                                 k.f32(rstd), n, d, group_size, current());
  }
  // The SSD scan: the CPU's chunked kernels on host copies until a CUDA scan is written.
  void ssd_scan_forward(view y, view states, input x, input dt_raw, input A_log, input B, input C, input D,
                        input dt_bias, const ssd_shape& s) override {
    host_detour h;
    kernels::ssd_scan_forward(h.out(y), h.out(states), h.in(x), h.in(dt_raw), h.in(A_log), h.in(B), h.in(C), h.in(D),
                              h.in(dt_bias), s);
    h.finish();
  }
  void ssd_scan_backward(view dx, view ddt_raw, view dA_log, view dB, view dC, view dD, view ddt_bias, input dy,
                         input states, input x, input dt_raw, input A_log, input B, input C, input D, input dt_bias,
                         const ssd_shape& s) override {
    host_detour h;
    kernels::ssd_scan_backward(h.out(dx), h.out(ddt_raw), h.out(dA_log), h.out(dB), h.out(dC), h.out(dD),
                               h.out(ddt_bias), h.in(dy), h.in(states), h.in(x), h.in(dt_raw), h.in(A_log), h.in(B),
                               h.in(C), h.in(D), h.in(dt_bias), s);
    h.finish();
  }
  void sgd_step(view value, input grad, view momentum_buffer, const sgd_hyperparameters& h) override {
    cuda::sgd_step(static_cast<float*>(value.data), static_cast<const float*>(grad.data),
                   static_cast<float*>(momentum_buffer.data), value.numel(), h, current());
  }
  double sum_of_squares(input x) override { return reduced("sum_of_squares", x, cuda::sum_of_squares); }
  double count_zeros(input x) override { return reduced("count_zeros", x, cuda::count_zeros); }
  float amax(input x) override { return float(reduced("amax", x, cuda::amax)); }
  void round_through_fp8(view out, input x, float scale, float scale_inv, fp8_type t) override {
    device_stage k("round_through_fp8");
    cuda::round_through_fp8(k.f32(out), k.f32(x), x.numel(), scale, scale_inv, t == fp8_type::e5m2, current());
  }
  void round_through_fp8_blocks(view out, input x, int rows, int cols, int block_rows, int block_cols,
                                block_scale_rule rule, fp8_type t) override {
    device_stage k("round_through_fp8_blocks");
    cuda::round_through_fp8_blocks(k.f32(out), k.f32(x), rows, cols, block_rows, block_cols,
                                   rule == block_scale_rule::power_of_two, t == fp8_type::e5m2, current());
  }

 private:
  // A reduction into device scratch, its result brought to the host (waits for the stream).
  template <class Reduce>
  static double reduced(const char* kernel, input x, Reduce reduce) {
    device_stage k(kernel);
    mactor::cuda::device_buffer scratch({cuda::reduction_scratch}, dtype::float64, x.where.index);
    reduce(k.f32(x), x.numel(), scratch.as<double>(), current());
    const auto result = mactor::cuda::to_host(
        tensor::const_tensor_view{scratch.as<double>() + cuda::reduction_scratch - 1, {1}, dtype::float64, x.where},
        tensor::memory_kind::other, current());
    return result.host<double>()[0];
  }
};

}  // namespace

void enable_cuda_backend() {
  static cuda_tensor_kernels kernels;
  mactor::cuda::enable_device_tensors();
  register_device_kernels(tensor::device_type::cuda, &kernels);
}

}  // namespace mactor::kernels::cuda
