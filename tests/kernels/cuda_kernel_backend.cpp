// The CUDA kernels behind the kernel_backend interface: every call uploads its inputs, runs on
// the backend's stream, downloads what the kernel writes and waits for it.
#include "tests/kernels/cuda_kernel_backend.hpp"

#include "kernels/cuda/activations.hpp"
#include "kernels/cuda/adam.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/bias.hpp"
#include "kernels/cuda/convert.hpp"
#include "kernels/cuda/dropout.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/moe_permute.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rope.hpp"
#include "kernels/cuda/squared_relu.hpp"
#include "tensor/cuda/copy.hpp"
#include "tensor/cuda/device_allocator.hpp"
#include "tensor/cuda/stream.hpp"

namespace mactor::testing {

namespace {

namespace kc = kernels::cuda;
using mactor::cuda::device_buffer;

class cuda_kernel_backend final : public kernel_backend {
 public:
  std::string name() const override { return "cuda"; }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const floats& a, int lda, const floats& b, int ldb,
            float beta, floats& c, int ldc) override {
    auto da = up(a), db = up(b), dc = up(c);
    kc::gemm(ta, tb, m, n, k, alpha, da.as<float>(), lda, db.as<float>(), ldb, beta, dc.as<float>(), ldc, stream_);
    down(c, dc);
  }
  void gemm_bf16(bool ta, bool tb, int m, int n, int k, float alpha, const bf16s& a, int lda, const bf16s& b,
                 int ldb, float beta, bf16s& c, int ldc) override {
    auto da = up(a), db = up(b), dc = up(c);
    kc::gemm(ta, tb, m, n, k, alpha, da.as<tensor::bfloat16>(), lda, db.as<tensor::bfloat16>(), ldb, beta,
             dc.as<tensor::bfloat16>(), ldc, stream_);
    down(c, dc);
  }

  void gemm_bf16_fp32_out(bool ta, bool tb, int m, int n, int k, float alpha, const bf16s& a, int lda,
                          const bf16s& b, int ldb, float beta, floats& c, int ldc) override {
    auto da = up(a), db = up(b), dc = up(c);
    kc::gemm(ta, tb, m, n, k, alpha, da.as<tensor::bfloat16>(), lda, db.as<tensor::bfloat16>(), ldb, beta,
             dc.as<float>(), ldc, stream_);
    down(c, dc);
  }

  void rmsnorm_forward(floats& y, floats& rstd, const floats& x, const floats& gamma, int n, int h, float eps,
                       bool zc) override {
    auto dy = up(y), dr = up(rstd), dx = up(x), dg = up(gamma);
    kc::rmsnorm_forward(dy.as<float>(), dr.as<float>(), dx.as<float>(), dg.as<float>(), n, h, eps, zc, stream_);
    down(y, dy), down(rstd, dr);
  }
  void rmsnorm_backward(floats& dx, floats& dgamma, const floats& dy, const floats& x, const floats& gamma,
                        const floats& rstd, int n, int h, bool zc, bool acc) override {
    auto ddx = up(dx), ddg = up(dgamma), ddy = up(dy), d_x = up(x), dg = up(gamma), dr = up(rstd);
    kc::rmsnorm_backward(or_null<float>(ddx, dx), or_null<float>(ddg, dgamma), ddy.as<float>(), d_x.as<float>(),
                         dg.as<float>(), dr.as<float>(), n, h, zc, acc, stream_);
    down(dx, ddx), down(dgamma, ddg);
  }
  void layernorm_forward(floats& y, floats& mean, floats& rstd, const floats& x, const floats& gamma,
                         const floats& beta, int n, int h, float eps, bool zc) override {
    auto dy = up(y), dm = up(mean), dr = up(rstd), dx = up(x), dg = up(gamma), db = up(beta);
    kc::layernorm_forward(dy.as<float>(), dm.as<float>(), dr.as<float>(), dx.as<float>(), dg.as<float>(),
                          or_null<float>(db, beta), n, h, eps, zc, stream_);
    down(y, dy), down(mean, dm), down(rstd, dr);
  }
  void layernorm_backward(floats& dx, floats& dgamma, floats& dbeta, const floats& dy, const floats& x,
                          const floats& gamma, const floats& mean, const floats& rstd, int n, int h, bool zc,
                          bool acc) override {
    auto ddx = up(dx), ddg = up(dgamma), ddb = up(dbeta), ddy = up(dy), d_x = up(x), dg = up(gamma);
    auto dm = up(mean), dr = up(rstd);
    kc::layernorm_backward(or_null<float>(ddx, dx), or_null<float>(ddg, dgamma), or_null<float>(ddb, dbeta),
                           ddy.as<float>(), d_x.as<float>(), dg.as<float>(), dm.as<float>(), dr.as<float>(), n, h, zc,
                           acc, stream_);
    down(dx, ddx), down(dgamma, ddg), down(dbeta, ddb);
  }

  void swiglu_forward(floats& y, const floats& x, int n, int f) override {
    auto dy = up(y), dx = up(x);
    kc::swiglu_forward(dy.as<float>(), dx.as<float>(), n, f, stream_);
    down(y, dy);
  }
  void swiglu_backward(floats& dx, const floats& dy, const floats& x, int n, int f) override {
    auto ddx = up(dx), ddy = up(dy), d_x = up(x);
    kc::swiglu_backward(ddx.as<float>(), ddy.as<float>(), d_x.as<float>(), n, f, stream_);
    down(dx, ddx);
  }
  void gelu_forward(floats& y, const floats& x, bool tanh_form) override {
    auto dy = up(y), dx = up(x);
    kc::gelu_forward(dy.as<float>(), dx.as<float>(), std::int64_t(x.size()), tanh_form, stream_);
    down(y, dy);
  }
  void gelu_backward(floats& dx, const floats& dy, const floats& x, bool tanh_form) override {
    auto ddx = up(dx), ddy = up(dy), d_x = up(x);
    kc::gelu_backward(ddx.as<float>(), ddy.as<float>(), d_x.as<float>(), std::int64_t(x.size()), tanh_form, stream_);
    down(dx, ddx);
  }

  void embedding_forward(floats& out, const floats& table, const ids& tokens, int n, int hidden, int vocab_start,
                         int vocab_end, float beta) override {
    auto dout = up(out), dt = up(table), di = up(tokens);
    kc::embedding_forward(dout.as<float>(), dt.as<float>(), di.as<std::int32_t>(), n, hidden, vocab_start, vocab_end,
                          beta, stream_);
    down(out, dout);
  }
  void embedding_backward(floats& dtable, const floats& dout, const ids& tokens, int n, int hidden, int vocab_start,
                          int vocab_end) override {
    auto dt = up(dtable), dd = up(dout), di = up(tokens);
    kc::embedding_backward(dt.as<float>(), dd.as<float>(), di.as<std::int32_t>(), n, hidden, vocab_start, vocab_end,
                           stream_);
    down(dtable, dt);
  }

  void cross_entropy(floats& loss, floats& logits, const ids& labels, const floats& grad_scale, int n, int v,
                     int vocab_start) override {
    auto dl = up(loss), dlog = up(logits), dlab = up(labels), dg = up(grad_scale);
    floats scratch(n);
    auto row_max = up(scratch), sum_exp = up(scratch), target = up(scratch);
    kc::cross_entropy_row_max(row_max.as<float>(), dlog.as<float>(), n, v, stream_);
    kc::cross_entropy_shard_sums(sum_exp.as<float>(), target.as<float>(), dlog.as<float>(), row_max.as<float>(),
                                 dlab.as<std::int32_t>(), n, v, vocab_start, stream_);
    kc::cross_entropy_loss(dl.as<float>(), sum_exp.as<float>(), row_max.as<float>(), target.as<float>(), n, stream_);
    kc::cross_entropy_backward(dlog.as<float>(), sum_exp.as<float>(), dlab.as<std::int32_t>(), dg.as<float>(), n, v,
                               vocab_start, stream_);
    down(loss, dl), down(logits, dlog);
  }

  void rope_apply(floats& x, const floats& cos, const floats& sin, const rope_layout& r, bool interleaved,
                  bool inverse) override {
    auto dx = up(x), dc = up(cos), ds = up(sin);
    kc::rope_apply(dx.as<float>(), dc.as<float>(), ds.as<float>(), r.seq, r.batch, r.groups, r.heads_per_group,
                   r.head_dim, r.rot_dim, r.row_stride, r.group_stride, interleaved, inverse, stream_);
    down(x, dx);
  }

  void adam(std::vector<floats>& values, std::vector<floats>& exp_avg, std::vector<floats>& exp_avg_sq,
            const std::vector<std::vector<floats>>& grads, const adam_settings& settings) override {
    std::vector<device_buffer> value, grad, m, v;
    std::vector<kc::adam_tensor> tensors;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const floats zeros(values[i].size());
      value.push_back(up(values[i])), grad.push_back(up(zeros)), m.push_back(up(zeros)), v.push_back(up(zeros));
      tensors.push_back({value[i].as<float>(), grad[i].as<float>(), m[i].as<float>(), v[i].as<float>(),
                         std::int64_t(values[i].size())});
    }
    kc::adam_hyperparameters h{settings.lr, settings.weight_decay, settings.beta1, settings.beta2, settings.eps,
                               settings.decoupled_weight_decay, 0};
    for (const auto& step_grads : grads) {
      for (std::size_t i = 0; i < values.size(); ++i) {
        const auto bytes = std::int64_t(step_grads[i].size() * sizeof(float));
        const tensor::const_tensor_view host{step_grads[i].data(), {bytes}, byte_type};
        mactor::cuda::copy(grad[i].view(), host, stream_);
      }
      h.step += 1;
      kc::adam_step(tensors, h, stream_);
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      exp_avg[i].resize(values[i].size()), exp_avg_sq[i].resize(values[i].size());
      down(values[i], value[i]), down(exp_avg[i], m[i]), down(exp_avg_sq[i], v[i]);
    }
  }

  void attention(attention_io& io) override {
    auto qkv = up(io.qkv), kv = up(io.kv), sink = up(io.sink), dout = up(io.dout), starts = up(io.document_start);
    auto out = up(io.out), probs = up(io.probs), dqkv = up(io.dqkv), dkv = up(io.dkv), dsink = up(io.dsink);
    auto dims = io.dims;
    dims.document_start = or_null<std::int32_t>(starts, io.document_start);
    device_buffer scratch({kc::attention_backward_scratch(dims)}, tensor::dtype::float32);
    const float* kv_or_null = or_null<float>(kv, io.kv);
    const float* sink_or_null = or_null<float>(sink, io.sink);
    kc::attention_forward(out.as<float>(), probs.as<float>(), qkv.as<float>(), dims, io.scale, io.dropout_p,
                          io.dropout_stream, sink_or_null, kv_or_null, stream_);
    kc::attention_backward(dqkv.as<float>(), dout.as<float>(), qkv.as<float>(), probs.as<float>(), dims, io.scale,
                           io.dropout_p, io.dropout_stream, scratch.as<float>(), sink_or_null,
                           or_null<float>(dsink, io.dsink), kv_or_null,
                           or_null<float>(dkv, io.kv), stream_);
    down(io.out, out), down(io.probs, probs), down(io.dqkv, dqkv), down(io.dkv, dkv), down(io.dsink, dsink);
  }

  void round_to_16_bits(const floats& x, bf16s& bf16, halves& fp16, floats& bf16_back, floats& fp16_back) override {
    const auto n = std::int64_t(x.size());
    auto dx = up(x), db = up(bf16), dh = up(fp16), dbb = up(bf16_back), dhb = up(fp16_back);
    kc::round_from_float(db.as<tensor::bfloat16>(), dx.as<float>(), n, stream_);
    kc::round_from_float(dh.as<tensor::float16>(), dx.as<float>(), n, stream_);
    kc::widen_to_float(dbb.as<float>(), db.as<tensor::bfloat16>(), n, stream_);
    kc::widen_to_float(dhb.as<float>(), dh.as<tensor::float16>(), n, stream_);
    down(bf16, db), down(fp16, dh), down(bf16_back, dbb), down(fp16_back, dhb);
  }

  void dropout_apply(floats& y, const floats& x, float p, std::uint64_t stream, std::uint64_t first) override {
    auto dy = up(y), dx = up(x);
    kc::dropout_apply(dy.as<float>(), dx.as<float>(), std::int64_t(x.size()), p, stream, first, stream_);
    down(y, dy);
  }
  void bias_dropout_add(floats& out, const floats& residual, const floats& x, const floats& bias, int n, int w,
                        float p, std::uint64_t stream, std::uint64_t first) override {
    auto dout = up(out), dr = up(residual), dx = up(x), db = up(bias);
    kc::bias_dropout_add(dout.as<float>(), dr.as<float>(), dx.as<float>(), or_null<float>(db, bias), n,
                         w, p, stream, first, stream_);
    down(out, dout);
  }

  void bias(floats& y, floats& dbias, const floats& bias, const floats& dy, int n, int w) override {
    auto d_y = up(y), ddb = up(dbias), db = up(bias), ddy = up(dy);
    kc::bias_add(d_y.as<float>(), db.as<float>(), n, w, stream_);
    kc::bias_backward(ddb.as<float>(), ddy.as<float>(), n, w, stream_);
    down(y, d_y), down(dbias, ddb);
  }

  void squared_relu(floats& y, floats& dx, const floats& x, const floats& dy) override {
    auto d_y = up(y), ddx = up(dx), d_x = up(x), ddy = up(dy);
    kc::squared_relu_forward(d_y.as<float>(), d_x.as<float>(), std::int64_t(x.size()), stream_);
    kc::squared_relu_backward(ddx.as<float>(), ddy.as<float>(), d_x.as<float>(), std::int64_t(x.size()), stream_);
    down(y, d_y), down(dx, ddx);
  }
  void weighted_squared_relu(floats& y, floats& dx, floats& dw, const floats& x, const floats& w, const floats& dy,
                             int rows, int width) override {
    auto d_y = up(y), ddx = up(dx), ddw = up(dw), d_x = up(x), d_w = up(w), ddy = up(dy);
    kc::weighted_squared_relu_forward(d_y.as<float>(), d_x.as<float>(), d_w.as<float>(), rows, width, stream_);
    kc::weighted_squared_relu_backward(ddx.as<float>(), ddw.as<float>(), ddy.as<float>(), d_x.as<float>(),
                                       d_w.as<float>(), rows, width, stream_);
    down(y, d_y), down(dx, ddx), down(dw, ddw);
  }

  void gather_rows(floats& out, const floats& in, const row_ids& rows, int w) override {
    auto dout = up(out), din = up(in), dr = up(rows);
    kc::gather_rows(dout.as<float>(), din.as<float>(), dr.as<std::int64_t>(), std::int64_t(rows.size()), w, stream_);
    down(out, dout);
  }
  void scatter_add_rows(floats& out, const floats& in, const row_ids& rows, int w) override {
    auto dout = up(out), din = up(in), dr = up(rows);
    kc::scatter_add_rows(dout.as<float>(), din.as<float>(), dr.as<std::int64_t>(), std::int64_t(rows.size()), w,
                         stream_);
    down(out, dout);
  }
  void scale_rows(floats& out, const floats& in, const floats& scale, int w) override {
    auto dout = up(out), din = up(in), ds = up(scale);
    kc::scale_rows(dout.as<float>(), din.as<float>(), ds.as<float>(), std::int64_t(scale.size()), w, stream_);
    down(out, dout);
  }
  void row_dots(floats& out, const floats& a, const floats& b, int w) override {
    auto dout = up(out), da = up(a), db = up(b);
    kc::row_dots(dout.as<float>(), da.as<float>(), db.as<float>(), std::int64_t(out.size()), w, stream_);
    down(out, dout);
  }

 private:
  // Buffers travel as bytes (a 1-byte dtype), so floats, bf16 and int32 ids take one path.
  static constexpr tensor::dtype byte_type = tensor::dtype::float8_e4m3;

  // d's data, or nullptr for an argument left out (an empty host vector).
  template <class T, class V>
  static T* or_null(const device_buffer& d, const std::vector<V>& host) {
    return host.empty() ? nullptr : d.as<T>();
  }

  template <class T>
  device_buffer up(const std::vector<T>& v) {
    const auto bytes = std::int64_t(v.size() * sizeof(T));
    device_buffer d({bytes}, byte_type);
    mactor::cuda::copy(d.view(), tensor::const_tensor_view{v.data(), {bytes}, byte_type}, stream_);
    return d;
  }
  // Copies d back into v and waits for the stream, so v holds the kernel's result.
  template <class T>
  void down(std::vector<T>& v, const device_buffer& d) {
    const auto bytes = std::int64_t(v.size() * sizeof(T));
    mactor::cuda::copy(tensor::tensor_view{v.data(), {bytes}, byte_type}, d.view(), stream_);
    stream_.synchronize();
  }

  mactor::cuda::stream stream_;
};

}  // namespace

std::unique_ptr<kernel_backend> make_cuda_kernel_backend() { return std::make_unique<cuda_kernel_backend>(); }

}  // namespace mactor::testing
