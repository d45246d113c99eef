// A backend the kernel checks run against: the same kernels with host vectors in and out, so one
// test body (kernel_checks.hpp) checks the CPU kernels in every build and the CUDA kernels where a
// device is found. Each method has the contract of the kernel it names (kernels/*.hpp), in fp32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention_dims.hpp"
#include "tensor/half_float.hpp"

namespace mactor::testing {

using floats = std::vector<float>;
using ids = std::vector<std::int32_t>;
using bf16s = std::vector<tensor::bfloat16>;
using row_ids = std::vector<std::int64_t>;
using halves = std::vector<tensor::float16>;

/// How rope_apply sees x: [seq, batch, groups, heads_per_group, head_dim] with strides.
struct rope_layout {
  int seq, batch, groups, heads_per_group, head_dim, rot_dim;
  std::int64_t row_stride, group_stride;
};

/// Adam's settings for kernel_backend::adam.
struct adam_settings {
  double lr = 1e-3, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  bool decoupled_weight_decay = true;
};

/// One attention core call, forward then backward on the forward's probabilities
/// (kernels/attention.hpp). dims.document_start is set by the backend from document_start (empty:
/// no document mask); kv empty: no context parallelism (dkv stays empty); sink empty: none.
struct attention_io {
  kernels::attention_dims dims;
  float scale = 1, dropout_p = 0;
  std::uint64_t dropout_stream = 0;
  floats qkv, kv, sink, dout;
  ids document_start;
  // Outputs: out, probs and dqkv are sized by the caller; dkv with kv, dsink with sink (added to).
  floats out, probs, dqkv, dkv, dsink;
};

class kernel_backend {
 public:
  virtual ~kernel_backend() = default;
  virtual std::string name() const = 0;

  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const floats& a, int lda,
                    const floats& b, int ldb, float beta, floats& c, int ldc) = 0;
  /// bf16 operands and result, fp32 accumulation.
  virtual void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const bf16s& a, int lda,
                         const bf16s& b, int ldb, float beta, bf16s& c, int ldc) = 0;
  /// bf16 operands, fp32 result (accumulated into with beta).
  virtual void gemm_bf16_fp32_out(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const bf16s& a,
                                  int lda, const bf16s& b, int ldb, float beta, floats& c, int ldc) = 0;

  virtual void rmsnorm_forward(floats& y, floats& rstd, const floats& x, const floats& gamma, int n, int h, float eps,
                               bool zero_centered_gamma) = 0;
  /// The norms' backwards: dx or dgamma (with dbeta) empty leaves that part out (zero-bubble's split).
  virtual void rmsnorm_backward(floats& dx, floats& dgamma, const floats& dy, const floats& x, const floats& gamma,
                                const floats& rstd, int n, int h, bool zero_centered_gamma, bool accumulate_dx) = 0;
  /// beta and dbeta empty: no bias.
  virtual void layernorm_forward(floats& y, floats& mean, floats& rstd, const floats& x, const floats& gamma,
                                 const floats& beta, int n, int h, float eps, bool zero_centered_gamma) = 0;
  virtual void layernorm_backward(floats& dx, floats& dgamma, floats& dbeta, const floats& dy, const floats& x,
                                  const floats& gamma, const floats& mean, const floats& rstd, int n, int h,
                                  bool zero_centered_gamma, bool accumulate_dx) = 0;

  virtual void swiglu_forward(floats& y, const floats& x, int n, int f) = 0;
  virtual void swiglu_backward(floats& dx, const floats& dy, const floats& x, int n, int f) = 0;
  virtual void gelu_forward(floats& y, const floats& x, bool tanh_approximation) = 0;
  virtual void gelu_backward(floats& dx, const floats& dy, const floats& x, bool tanh_approximation) = 0;

  virtual void embedding_forward(floats& out, const floats& table, const ids& tokens, int n, int hidden,
                                 int vocab_start, int vocab_end, float beta) = 0;
  virtual void embedding_backward(floats& dtable, const floats& dout, const ids& tokens, int n, int hidden,
                                  int vocab_start, int vocab_end) = 0;

  /// The four cross-entropy steps in a row, as one shard of the whole vocabulary: logits are
  /// replaced by their gradient (grad_scale per row).
  virtual void cross_entropy(floats& loss, floats& logits, const ids& labels, const floats& grad_scale, int n, int v,
                             int vocab_start) = 0;

  /// Rotates x in place with the cos/sin tables [seq, rot_dim / 2].
  virtual void rope_apply(floats& x, const floats& cos, const floats& sin, const rope_layout& r, bool interleaved,
                          bool inverse) = 0;

  /// grads.size() Adam steps (numbered from 1) on the tensors `values` with moments starting at
  /// zero, grads[step][tensor] the gradients; returns the moments in exp_avg and exp_avg_sq.
  virtual void adam(std::vector<floats>& values, std::vector<floats>& exp_avg, std::vector<floats>& exp_avg_sq,
                    const std::vector<std::vector<floats>>& grads, const adam_settings& settings) = 0;

  virtual void attention(attention_io& io) = 0;

  /// x rounded to bf16 and to fp16, and each widened back to fp32 (kernels/convert.hpp).
  virtual void round_to_16_bits(const floats& x, bf16s& bf16, halves& fp16, floats& bf16_back, floats& fp16_back) = 0;

  /// y = dropout(x) with mask elements first_index + i of `stream`.
  virtual void dropout_apply(floats& y, const floats& x, float p, std::uint64_t stream, std::uint64_t first_index) = 0;
  /// out[n, w] = residual + dropout(x + bias); bias empty: none.
  virtual void bias_dropout_add(floats& out, const floats& residual, const floats& x, const floats& bias, int n, int w,
                                float p, std::uint64_t stream, std::uint64_t first_index) = 0;

  /// y[n, w] += bias, then dbias += the column sums of dy[n, w].
  virtual void bias(floats& y, floats& dbias, const floats& bias, const floats& dy, int n, int w) = 0;

  /// y = relu(x)^2 and dx from dy.
  virtual void squared_relu(floats& y, floats& dx, const floats& x, const floats& dy) = 0;
  /// The per-row weighted form on [rows, width]: y, then dx and dw from dy.
  virtual void weighted_squared_relu(floats& y, floats& dx, floats& dw, const floats& x, const floats& w,
                                     const floats& dy, int rows, int width) = 0;

  /// The MoE row operations on rows of width w (kernels/moe_permute.hpp): rows.size() rows
  /// gathered or scatter-added; scale_rows over scale.size() rows, row_dots over out.size().
  virtual void gather_rows(floats& out, const floats& in, const row_ids& rows, int w) = 0;
  virtual void scatter_add_rows(floats& out, const floats& in, const row_ids& rows, int w) = 0;
  virtual void scale_rows(floats& out, const floats& in, const floats& scale, int w) = 0;
  virtual void row_dots(floats& out, const floats& a, const floats& b, int w) = 0;
};

}  // namespace mactor::testing
