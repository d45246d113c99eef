// The kernels of a device backend, as the tensor entry points call them. The CPU kernels are the
// entry points themselves; a device backend (kernels/cuda/tensor_kernels.hpp for CUDA) registers
// an implementation of this interface for its device type, and each entry point hands views on
// that device over to it after its own size checks. An entry point without a device
// implementation, or a device without a registered backend, is an unsupported_kernel error that
// names the kernel, the dtype and the device. Each method has the contract of the entry point of
// the same name (kernels/*.hpp); id and label pointers, and an attention's dims.document_start,
// point into the device's memory.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/adam_scalars.hpp"
#include "kernels/attention_dims.hpp"
#include "kernels/column_copy.hpp"
#include "kernels/fp8.hpp"
#include "kernels/ring_block_dims.hpp"
#include "kernels/sgd_scalars.hpp"
#include "kernels/ssd_shape.hpp"
#include "tensor/tensor.hpp"

namespace mactor::kernels {

class device_kernels {
 public:
  using view = tensor::tensor_view;
  using input = tensor::const_tensor_view;
  virtual ~device_kernels() = default;

  // tensor_ops.hpp
  virtual void scale(view x, double factor) = 0;
  virtual void add(view dst, input src) = 0;
  virtual void copy(view dst, input src) = 0;
  virtual void fill_zero(view x) = 0;
  // convert.hpp
  virtual void convert(view dst, input src) = 0;
  virtual void round_through(view x, tensor::dtype type) = 0;
  // bias.hpp
  virtual void bias_add(view y, input bias, int n, int w) = 0;
  virtual void bias_backward(view dbias, input dy, int n, int w) = 0;
  // gemm.hpp
  virtual void linear_forward(input x, input w, view y, int rows, int in, int out, double beta) = 0;
  virtual void linear_backward_input(input dy, input w, view dx, int rows, int in, int out, double beta) = 0;
  virtual void linear_backward_weight(input dy, input x, view dw, int rows, int in, int out) = 0;
  // rmsnorm.hpp, layernorm.hpp
  virtual void rmsnorm_forward(view y, view rstd, input x, input gamma, int n, int h, double eps,
                               bool zero_centered_gamma) = 0;
  virtual void rmsnorm_backward(view dx, view dgamma, input dy, input x, input gamma, input rstd, int n, int h,
                                bool zero_centered_gamma, bool accumulate_dx) = 0;
  virtual void layernorm_forward(view y, view mean, view rstd, input x, input gamma, input beta, int n, int h,
                                 double eps, bool zero_centered_gamma) = 0;
  virtual void layernorm_backward(view dx, view dgamma, view dbeta, input dy, input x, input gamma, input mean,
                                  input rstd, int n, int h, bool zero_centered_gamma, bool accumulate_dx) = 0;
  // gelu.hpp, swiglu.hpp, squared_relu.hpp
  virtual void gelu_forward(view y, input x, std::int64_t n, bool tanh_approximation) = 0;
  virtual void gelu_backward(view dx, input dy, input x, std::int64_t n, bool tanh_approximation) = 0;
  virtual void swiglu_forward(view y, input x, int n, int f) = 0;
  virtual void swiglu_backward(view dx, input dy, input x, int n, int f) = 0;
  virtual void squared_relu_forward(view y, input x, std::int64_t n) = 0;
  virtual void squared_relu_backward(view dx, input dy, input x, std::int64_t n) = 0;
  // dropout.hpp
  virtual void dropout_apply(view y, input x, std::int64_t n, float p, std::uint64_t stream,
                             std::uint64_t first_index) = 0;
  virtual void bias_dropout_add(view out, input residual, input x, input bias, int n, int w, float p,
                                std::uint64_t stream, std::uint64_t first_index) = 0;
  // moe_permute.hpp: the rows are on the host (checked there), each backend takes them over.
  virtual void gather_rows(view out, input in, std::span<const std::int64_t> rows, int w) = 0;
  virtual void scatter_add_rows(view out, input in, std::span<const std::int64_t> rows, int w) = 0;
  virtual void scale_rows(view out, input in, input scale, std::int64_t n, int w) = 0;
  virtual void row_dots(view out, input a, input b, std::int64_t n, int w) = 0;
  // attention.hpp
  virtual void attention_forward(view out, view probs, input qkv, const attention_dims& dims, double scale,
                                 float dropout_p, std::uint64_t dropout_stream, input sink, input kv) = 0;
  virtual void attention_backward(view dqkv, input dout, input qkv, input probs, const attention_dims& dims,
                                  double scale, float dropout_p, std::uint64_t dropout_stream, input sink, view dsink,
                                  input kv, view dkv) = 0;
  // ring_attention_block.hpp
  virtual void ring_block_forward(view m, view l, view o, input qkv, input block, const ring_block_dims& r,
                                  double scale, float dropout_p, std::uint64_t dropout_stream) = 0;
  virtual void ring_block_backward(view dq, view dblock, input dout, input qkv, input block, input lse, input delta,
                                   const ring_block_dims& r, double scale, float dropout_p,
                                   std::uint64_t dropout_stream) = 0;
  // rope.hpp
  virtual void rope_apply(view x, input cos, input sin, int seq, int batch, int groups, int heads_per_group,
                          int head_dim, int rot_dim, std::int64_t row_stride, std::int64_t group_stride,
                          bool interleaved, bool inverse) = 0;
  // mla_rope.hpp
  virtual void mla_rope_apply(view x, input cos, input sin, int seq, int batch, int heads, std::int64_t row_stride,
                              std::int64_t head_stride, std::int64_t offset, int rot_dim, bool inverse) = 0;
  // embedding.hpp
  virtual void embedding_forward(view out, input table, const std::int32_t* ids, int n, int hidden, int vocab_start,
                                 int vocab_end, double beta) = 0;
  virtual void embedding_backward(view dtable, input dout, const std::int32_t* ids, int n, int hidden,
                                  int vocab_start, int vocab_end) = 0;
  // cross_entropy.hpp
  virtual void cross_entropy_row_max(view row_max, input logits, int n, int v) = 0;
  virtual void cross_entropy_shard_sums(view sum_exp, view target_logit, view logits, input row_max,
                                        const std::int32_t* labels, int n, int v, int vocab_start) = 0;
  virtual void cross_entropy_loss(view loss, input sum_exp, input row_max, input target_logit, int n) = 0;
  virtual void cross_entropy_backward(view exps, input sum_exp, const std::int32_t* labels, input grad_scale, int n,
                                      int v, int vocab_start) = 0;
  // Mamba: column_copy.hpp, causal_conv1d.hpp, gated_rmsnorm.hpp, ssd_scan.hpp
  virtual void copy_columns(view dst, column_block to, input src, column_block from, int columns, int seq,
                            int batch) = 0;
  virtual void causal_conv1d_forward(view y, input x, input w, input bias, int batch, int seq, int channels,
                                     int width, bool silu) = 0;
  virtual void causal_conv1d_backward(view dx, view dw, view dbias, input dy, input x, input w, input bias, int batch,
                                      int seq, int channels, int width, bool silu) = 0;
  virtual void gated_rmsnorm_forward(view y, view rstd, input x, input z, input weight, int n, int d, int group_size,
                                     double eps) = 0;
  virtual void gated_rmsnorm_backward(view dx, view dz, view dweight, input dy, input x, input z, input weight,
                                      input rstd, int n, int d, int group_size) = 0;
  virtual void ssd_scan_forward(view y, view states, input x, input dt_raw, input A_log, input B, input C, input D,
                                input dt_bias, const ssd_shape& s) = 0;
  virtual void ssd_scan_backward(view dx, view ddt_raw, view dA_log, view dB, view dC, view dD, view ddt_bias,
                                 input dy, input states, input x, input dt_raw, input A_log, input B, input C,
                                 input D, input dt_bias, const ssd_shape& s) = 0;
  // adam.hpp
  virtual void adam_step(view value, input grad, view exp_avg, view exp_avg_sq, const adam_hyperparameters& h) = 0;
  // sgd.hpp
  virtual void sgd_step(view value, input grad, view momentum_buffer, const sgd_hyperparameters& h) = 0;
  // reductions.hpp: the result on the host (the call waits for it).
  virtual double sum_of_squares(input x) = 0;
  virtual double count_zeros(input x) = 0;
  // fp8.hpp (amax's result on the host: the call waits for it)
  virtual float amax(input x) = 0;
  virtual void round_through_fp8(view out, input x, float scale, float scale_inv, fp8_type t) = 0;
  virtual void round_through_fp8_blocks(view out, input x, int rows, int cols, int block_rows, int block_cols,
                                        block_scale_rule rule, fp8_type t) = 0;
};

/// Installs `kernels` (which must outlive every call) for views on devices of `type` (not cpu);
/// nullptr removes them.
void register_device_kernels(tensor::device_type type, device_kernels* kernels);

/// True for a view that is not in host memory.
inline bool on_device(const tensor::const_tensor_view& v) { return v.where.type != tensor::device_type::cpu; }

/// The backend of v's device for `kernel`; throws unsupported_kernel naming the kernel, v's dtype
/// and device when that device has none registered.
device_kernels& device_kernels_for(const char* kernel, const tensor::const_tensor_view& v);

}  // namespace mactor::kernels
