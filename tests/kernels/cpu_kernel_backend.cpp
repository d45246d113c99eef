// The CPU kernels (fp32) behind the kernel_backend interface.
#include "tests/kernels/cpu_kernel_backend.hpp"

#include "kernels/attention.hpp"
#include "kernels/bias.hpp"
#include "kernels/convert.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/squared_relu.hpp"
#include "kernels/swiglu.hpp"
#include "model/optimizer_adam.hpp"

namespace mactor::testing {

namespace {

tensor::tensor_view view_of(floats& v) { return {v.data(), {std::int64_t(v.size())}, tensor::dtype::float32}; }
tensor::const_tensor_view view_of(const floats& v) {
  return {v.data(), {std::int64_t(v.size())}, tensor::dtype::float32};
}
// An argument left out (an empty vector) as a null pointer.
template <class T>
T* data_or_null(std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}
template <class T>
const T* data_or_null(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

floats widen(const bf16s& v) {
  floats out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = tensor::to_float(v[i]);
  return out;
}

class cpu_kernel_backend final : public kernel_backend {
 public:
  std::string name() const override { return "cpu"; }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const floats& a, int lda, const floats& b, int ldb,
            float beta, floats& c, int ldc) override {
    kernels::gemm<float>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  }

  // As a GPU does it: widen exactly, compute in fp32, round the result to nearest-even.
  void gemm_bf16(bool ta, bool tb, int m, int n, int k, float alpha, const bf16s& a, int lda, const bf16s& b,
                 int ldb, float beta, bf16s& c, int ldc) override {
    floats c32 = widen(c);
    kernels::gemm<float>(ta, tb, m, n, k, alpha, widen(a).data(), lda, widen(b).data(), ldb, beta, c32.data(), ldc);
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = tensor::to_bfloat16(c32[i]);
  }

  void gemm_bf16_fp32_out(bool ta, bool tb, int m, int n, int k, float alpha, const bf16s& a, int lda,
                          const bf16s& b, int ldb, float beta, floats& c, int ldc) override {
    kernels::gemm<float>(ta, tb, m, n, k, alpha, widen(a).data(), lda, widen(b).data(), ldb, beta, c.data(), ldc);
  }

  void rmsnorm_forward(floats& y, floats& rstd, const floats& x, const floats& gamma, int n, int h, float eps,
                       bool zc) override {
    kernels::rmsnorm_forward<float>(y.data(), rstd.data(), x.data(), gamma.data(), n, h, eps, zc);
  }
  void rmsnorm_backward(floats& dx, floats& dgamma, const floats& dy, const floats& x, const floats& gamma,
                        const floats& rstd, int n, int h, bool zc, bool acc) override {
    kernels::rmsnorm_backward<float>(data_or_null(dx), data_or_null(dgamma), dy.data(), x.data(), gamma.data(),
                                     rstd.data(), n, h, zc, acc);
  }
  void layernorm_forward(floats& y, floats& mean, floats& rstd, const floats& x, const floats& gamma,
                         const floats& beta, int n, int h, float eps, bool zc) override {
    kernels::layernorm_forward<float>(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                                      data_or_null(beta), n, h, eps, zc);
  }
  void layernorm_backward(floats& dx, floats& dgamma, floats& dbeta, const floats& dy, const floats& x,
                          const floats& gamma, const floats& mean, const floats& rstd, int n, int h, bool zc,
                          bool acc) override {
    kernels::layernorm_backward<float>(data_or_null(dx), data_or_null(dgamma), data_or_null(dbeta), dy.data(),
                                       x.data(), gamma.data(), mean.data(), rstd.data(), n, h, zc, acc);
  }

  void swiglu_forward(floats& y, const floats& x, int n, int f) override {
    kernels::swiglu_forward<float>(y.data(), x.data(), n, f);
  }
  void swiglu_backward(floats& dx, const floats& dy, const floats& x, int n, int f) override {
    kernels::swiglu_backward<float>(dx.data(), dy.data(), x.data(), n, f);
  }
  void gelu_forward(floats& y, const floats& x, bool tanh_form) override {
    kernels::gelu_forward<float>(y.data(), x.data(), std::int64_t(x.size()), tanh_form);
  }
  void gelu_backward(floats& dx, const floats& dy, const floats& x, bool tanh_form) override {
    kernels::gelu_backward<float>(dx.data(), dy.data(), x.data(), std::int64_t(x.size()), tanh_form);
  }

  void embedding_forward(floats& out, const floats& table, const ids& tokens, int n, int hidden, int vocab_start,
                         int vocab_end, float beta) override {
    kernels::embedding_forward<float>(out.data(), table.data(), tokens.data(), n, hidden, vocab_start, vocab_end, beta);
  }
  void embedding_backward(floats& dtable, const floats& dout, const ids& tokens, int n, int hidden, int vocab_start,
                          int vocab_end) override {
    kernels::embedding_backward<float>(dtable.data(), dout.data(), tokens.data(), n, hidden, vocab_start, vocab_end);
  }

  void cross_entropy(floats& loss, floats& logits, const ids& labels, const floats& grad_scale, int n, int v,
                     int vocab_start) override {
    floats row_max(n), sum_exp(n), target(n);
    kernels::cross_entropy_row_max<float>(row_max.data(), logits.data(), n, v);
    kernels::cross_entropy_shard_sums<float>(sum_exp.data(), target.data(), logits.data(), row_max.data(),
                                             labels.data(), n, v, vocab_start);
    kernels::cross_entropy_loss<float>(loss.data(), sum_exp.data(), row_max.data(), target.data(), n);
    kernels::cross_entropy_backward<float>(logits.data(), sum_exp.data(), labels.data(), grad_scale.data(), n, v,
                                           vocab_start);
  }

  void rope_apply(floats& x, const floats& cos, const floats& sin, const rope_layout& r, bool interleaved,
                  bool inverse) override {
    kernels::rope_apply<float>(x.data(), cos.data(), sin.data(), r.seq, r.batch, r.groups, r.heads_per_group,
                               r.head_dim, r.rot_dim, r.row_stride, r.group_stride, interleaved, inverse);
  }

  // The training optimizer itself (model::adam_optimizer), one group holding every tensor.
  void adam(std::vector<floats>& values, std::vector<floats>& exp_avg, std::vector<floats>& exp_avg_sq,
            const std::vector<std::vector<floats>>& grads, const adam_settings& settings) override {
    std::vector<floats> grad(values.size());
    std::vector<model::optim_param> params;
    model::param_group group;
    group.lr = settings.lr, group.weight_decay = settings.weight_decay;
    for (std::size_t i = 0; i < values.size(); ++i) {
      grad[i].resize(values[i].size());
      params.push_back({"p" + std::to_string(i), values[i].data(), grad[i].data(), values[i].size()});
      group.params.push_back(i);
    }
    model::adam_options options;
    options.beta1 = settings.beta1, options.beta2 = settings.beta2, options.eps = settings.eps;
    options.decoupled_weight_decay = settings.decoupled_weight_decay;
    model::adam_optimizer optimizer(std::move(params), {group}, options);
    for (const auto& step_grads : grads) {
      for (std::size_t i = 0; i < values.size(); ++i) grad[i] = step_grads[i];
      optimizer.step();
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      const float* m = optimizer.state()[i].exp_avg.fp32_data();
      const float* v = optimizer.state()[i].exp_avg_sq.fp32_data();
      exp_avg[i].assign(m, m + values[i].size());
      exp_avg_sq[i].assign(v, v + values[i].size());
    }
  }

  void attention(attention_io& io) override {
    auto dims = io.dims;
    dims.document_start = data_or_null(io.document_start);
    kernels::attention_forward<float>(io.out.data(), io.probs.data(), io.qkv.data(), dims, io.scale, io.dropout_p,
                                      io.dropout_stream, data_or_null(io.sink), data_or_null(io.kv));
    kernels::attention_backward<float>(io.dqkv.data(), io.dout.data(), io.qkv.data(), io.probs.data(), dims, io.scale,
                                       io.dropout_p, io.dropout_stream, data_or_null(io.sink), data_or_null(io.dsink),
                                       data_or_null(io.kv), data_or_null(io.dkv));
  }

  void round_to_16_bits(const floats& x, bf16s& bf16, halves& fp16, floats& bf16_back, floats& fp16_back) override {
    const auto n = std::int64_t(x.size());
    kernels::round_from_float(bf16.data(), x.data(), n), kernels::round_from_float(fp16.data(), x.data(), n);
    kernels::widen_to_float(bf16_back.data(), bf16.data(), n), kernels::widen_to_float(fp16_back.data(), fp16.data(), n);
  }

  void dropout_apply(floats& y, const floats& x, float p, std::uint64_t stream, std::uint64_t first) override {
    kernels::dropout_apply<float>(y.data(), x.data(), std::int64_t(x.size()), p, stream, first);
  }
  void bias_dropout_add(floats& out, const floats& residual, const floats& x, const floats& bias, int n, int w,
                        float p, std::uint64_t stream, std::uint64_t first) override {
    kernels::bias_dropout_add<float>(out.data(), residual.data(), x.data(), data_or_null(bias), n, w, p, stream,
                                     first);
  }

  void bias(floats& y, floats& dbias, const floats& bias, const floats& dy, int n, int w) override {
    kernels::bias_add<float>(y.data(), bias.data(), n, w);
    kernels::bias_backward<float>(dbias.data(), dy.data(), n, w);
  }

  void squared_relu(floats& y, floats& dx, const floats& x, const floats& dy) override {
    kernels::squared_relu_forward<float>(y.data(), x.data(), std::int64_t(x.size()));
    kernels::squared_relu_backward<float>(dx.data(), dy.data(), x.data(), std::int64_t(x.size()));
  }
  void weighted_squared_relu(floats& y, floats& dx, floats& dw, const floats& x, const floats& w, const floats& dy,
                             int rows, int width) override {
    kernels::weighted_squared_relu_forward<float>(y.data(), x.data(), w.data(), rows, width);
    kernels::weighted_squared_relu_backward<float>(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rows, width);
  }

  void gather_rows(floats& out, const floats& in, const row_ids& rows, int w) override {
    kernels::gather_rows(view_of(out), view_of(in), rows, w);
  }
  void scatter_add_rows(floats& out, const floats& in, const row_ids& rows, int w) override {
    kernels::scatter_add_rows(view_of(out), view_of(in), rows, w);
  }
  void scale_rows(floats& out, const floats& in, const floats& scale, int w) override {
    kernels::scale_rows(view_of(out), view_of(in), view_of(scale), std::int64_t(scale.size()), w);
  }
  void row_dots(floats& out, const floats& a, const floats& b, int w) override {
    kernels::row_dots(view_of(out), view_of(a), view_of(b), std::int64_t(out.size()), w);
  }
};

}  // namespace

std::unique_ptr<kernel_backend> make_cpu_kernel_backend() { return std::make_unique<cpu_kernel_backend>(); }

}  // namespace mactor::testing
