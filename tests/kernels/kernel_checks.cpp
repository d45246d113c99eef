// The kernel checks: each draws inputs, runs the backend in fp32 and the CPU kernel in double on
// the same inputs, and requires |got - want| <= tolerance * (1 + |want|) element by element.
#include "tests/kernels/kernel_checks.hpp"
#include "tests/kernels/kernel_check_support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <tuple>
#include <string>

#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"

namespace mactor::testing {

namespace {

struct gemm_case {
  bool trans_a, trans_b;
  int m, n, k;
  float alpha, beta;
};

// Transposes, odd sizes, beta 0 and not, leading dimensions wider than the rows.
const gemm_case gemm_cases[] = {
    {false, false, 1, 1, 1, 1.f, 0.f},     {false, true, 7, 13, 5, 1.f, 0.f},  {true, false, 33, 17, 65, 0.5f, 1.f},
    {true, true, 64, 48, 31, 1.f, -0.5f}, {false, true, 129, 257, 96, 1.f, 1.f}, {false, false, 3, 200, 1, 2.f, 0.f},
};

}  // namespace

void check_gemm(kernel_backend& backend) {
  std::mt19937 rng(11);
  for (const auto& g : gemm_cases) {
    INFO(backend.name() << " gemm " << g.trans_a << g.trans_b << " m=" << g.m << " n=" << g.n << " k=" << g.k);
    const int pad = 3;  // leading dimensions past the matrix width
    const int a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
    const int b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
    const int lda = a_cols + pad, ldb = b_cols + pad, ldc = g.n + pad;
    const floats a = random_floats(std::size_t(a_rows) * lda, rng), b = random_floats(std::size_t(b_rows) * ldb, rng);
    floats c = random_floats(std::size_t(g.m) * ldc, rng);
    doubles want = widen(c);
    kernels::gemm<double>(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, widen(a).data(), lda, widen(b).data(), ldb,
                          g.beta, want.data(), ldc);
    backend.gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc);
    require_close("c", c, want, 2e-5 * std::sqrt(double(g.k)));
  }
}

namespace {

bf16s to_bf16(const floats& v) {
  bf16s out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = tensor::to_bfloat16(v[i]);
  return out;
}

doubles to_doubles(const bf16s& v) {
  doubles out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = tensor::to_float(v[i]);
  return out;
}

}  // namespace

// bf16 operands (exact in fp32 and double), into a bf16 c and into an fp32 c.
void check_gemm_bf16(kernel_backend& backend) {
  std::mt19937 rng(12);
  for (const auto& g : gemm_cases) {
    INFO(backend.name() << " bf16 gemm " << g.trans_a << g.trans_b << " m=" << g.m << " n=" << g.n << " k=" << g.k);
    const int lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n, ldc = g.n;
    const bf16s a = to_bf16(random_floats(std::size_t(g.m) * g.k, rng));
    const bf16s b = to_bf16(random_floats(std::size_t(g.k) * g.n, rng));
    const doubles a64 = to_doubles(a), b64 = to_doubles(b);
    bf16s c = to_bf16(random_floats(std::size_t(g.m) * g.n, rng));
    floats c32 = random_floats(std::size_t(g.m) * g.n, rng);
    doubles want = to_doubles(c), want32 = widen(c32);
    kernels::gemm<double>(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a64.data(), lda, b64.data(), ldb, g.beta,
                          want.data(), ldc);
    kernels::gemm<double>(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a64.data(), lda, b64.data(), ldb, g.beta,
                          want32.data(), ldc);
    backend.gemm_bf16(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc);
    backend.gemm_bf16_fp32_out(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c32, ldc);
    floats got(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) got[i] = tensor::to_float(c[i]);
    // The error is fp32 accumulation, plus for a bf16 c its rounding to bf16 (2^-8 relative).
    require_close("bf16 c", got, want, 1.0 / 128);
    require_close("fp32 c", c32, want32, 2e-5 * std::sqrt(double(g.k)));
  }
}

namespace {
struct norm_case {
  int n, h;
  bool zero_centered_gamma, accumulate_dx;
};
const norm_case norm_cases[] = {{1, 1, false, false}, {3, 7, true, false},     {5, 255, false, true},
                                {17, 1000, false, false}, {2, 4097, true, true}};
}  // namespace

void check_rmsnorm(kernel_backend& backend) {
  std::mt19937 rng(21);
  for (const auto& c : norm_cases) {
    INFO(backend.name() << " rmsnorm n=" << c.n << " h=" << c.h << " zc=" << c.zero_centered_gamma);
    const std::size_t nh = std::size_t(c.n) * c.h;
    const floats x = random_floats(nh, rng, 2.f), gamma = random_floats(c.h, rng), dy = random_floats(nh, rng);
    floats y(nh), rstd(c.n), dx = random_floats(nh, rng), dgamma = random_floats(c.h, rng);
    doubles want_y(nh), want_rstd(c.n), want_dx = widen(dx), want_dgamma = widen(dgamma);
    kernels::rmsnorm_forward<double>(want_y.data(), want_rstd.data(), widen(x).data(), widen(gamma).data(), c.n, c.h,
                                     1e-5, c.zero_centered_gamma);
    kernels::rmsnorm_backward<double>(want_dx.data(), want_dgamma.data(), widen(dy).data(), widen(x).data(),
                                      widen(gamma).data(), want_rstd.data(), c.n, c.h, c.zero_centered_gamma,
                                      c.accumulate_dx);
    floats dx_alone = dx, dgamma_alone = dgamma, none;
    backend.rmsnorm_forward(y, rstd, x, gamma, c.n, c.h, 1e-5f, c.zero_centered_gamma);
    backend.rmsnorm_backward(dx, dgamma, dy, x, gamma, rstd, c.n, c.h, c.zero_centered_gamma, c.accumulate_dx);
    require_close("y", y, want_y, 1e-5), require_close("rstd", rstd, want_rstd, 1e-5);
    require_close("dx", dx, want_dx, 1e-4), require_close("dgamma", dgamma, want_dgamma, 1e-4);
    // A zero-bubble backward's split: dx alone, then dgamma alone, give the joint call's bits.
    backend.rmsnorm_backward(dx_alone, none, dy, x, gamma, rstd, c.n, c.h, c.zero_centered_gamma, c.accumulate_dx);
    backend.rmsnorm_backward(none, dgamma_alone, dy, x, gamma, rstd, c.n, c.h, c.zero_centered_gamma, c.accumulate_dx);
    CHECK(dx_alone == dx);
    CHECK(dgamma_alone == dgamma);
  }
}

void check_layernorm(kernel_backend& backend) {
  std::mt19937 rng(22);
  for (const auto& c : norm_cases) {
    const bool with_bias = c.h % 2 == 1;
    INFO(backend.name() << " layernorm n=" << c.n << " h=" << c.h << " bias=" << with_bias);
    const std::size_t nh = std::size_t(c.n) * c.h;
    const floats x = random_floats(nh, rng, 3.f), gamma = random_floats(c.h, rng), dy = random_floats(nh, rng);
    const floats beta = with_bias ? random_floats(c.h, rng) : floats{};
    floats y(nh), mean(c.n), rstd(c.n), dx = random_floats(nh, rng), dgamma = random_floats(c.h, rng);
    floats dbeta = with_bias ? random_floats(c.h, rng) : floats{};
    doubles want_y(nh), want_mean(c.n), want_rstd(c.n), want_dx = widen(dx), want_dgamma = widen(dgamma);
    doubles want_dbeta = widen(dbeta), beta64 = widen(beta);
    kernels::layernorm_forward<double>(want_y.data(), want_mean.data(), want_rstd.data(), widen(x).data(),
                                       widen(gamma).data(), with_bias ? beta64.data() : nullptr, c.n, c.h, 1e-5,
                                       c.zero_centered_gamma);
    kernels::layernorm_backward<double>(want_dx.data(), want_dgamma.data(), with_bias ? want_dbeta.data() : nullptr,
                                        widen(dy).data(), widen(x).data(), widen(gamma).data(), want_mean.data(),
                                        want_rstd.data(), c.n, c.h, c.zero_centered_gamma, c.accumulate_dx);
    floats dx_alone = dx, dgamma_alone = dgamma, dbeta_alone = dbeta, none;
    backend.layernorm_forward(y, mean, rstd, x, gamma, beta, c.n, c.h, 1e-5f, c.zero_centered_gamma);
    backend.layernorm_backward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, c.n, c.h, c.zero_centered_gamma,
                               c.accumulate_dx);
    // A zero-bubble backward's split: dx alone, then the weight gradients alone: the same bits.
    backend.layernorm_backward(dx_alone, none, none, dy, x, gamma, mean, rstd, c.n, c.h, c.zero_centered_gamma,
                               c.accumulate_dx);
    backend.layernorm_backward(none, dgamma_alone, dbeta_alone, dy, x, gamma, mean, rstd, c.n, c.h,
                               c.zero_centered_gamma, c.accumulate_dx);
    CHECK(dx_alone == dx);
    CHECK(dgamma_alone == dgamma);
    CHECK(dbeta_alone == dbeta);
    require_close("y", y, want_y, 1e-5), require_close("mean", mean, want_mean, 1e-5);
    require_close("rstd", rstd, want_rstd, 1e-5), require_close("dx", dx, want_dx, 1e-4);
    require_close("dgamma", dgamma, want_dgamma, 1e-4), require_close("dbeta", dbeta, want_dbeta, 1e-4);
  }
}

void check_swiglu(kernel_backend& backend) {
  std::mt19937 rng(31);
  for (auto [n, f] : {std::pair{1, 1}, {3, 5}, {7, 129}, {64, 1000}}) {
    INFO(backend.name() << " swiglu n=" << n << " f=" << f);
    const std::size_t nf = std::size_t(n) * f;
    const floats x = random_floats(2 * nf, rng, 4.f), dy = random_floats(nf, rng);
    floats y(nf), dx(2 * nf);
    doubles want_y(nf), want_dx(2 * nf);
    kernels::swiglu_forward<double>(want_y.data(), widen(x).data(), n, f);
    kernels::swiglu_backward<double>(want_dx.data(), widen(dy).data(), widen(x).data(), n, f);
    backend.swiglu_forward(y, x, n, f);
    backend.swiglu_backward(dx, dy, x, n, f);
    require_close("y", y, want_y, 1e-6), require_close("dx", dx, want_dx, 1e-6);
  }
}

void check_gelu(kernel_backend& backend) {
  std::mt19937 rng(32);
  for (const bool tanh_form : {false, true})
    for (const std::size_t count : {std::size_t(1), std::size_t(1023), std::size_t(100003)}) {
      INFO(backend.name() << " gelu tanh=" << tanh_form << " n=" << count);
      const floats x = random_floats(count, rng, 6.f), dy = random_floats(count, rng);
      floats y(count), dx(count);
      doubles want_y(count), want_dx(count);
      kernels::gelu_forward<double>(want_y.data(), widen(x).data(), std::int64_t(count), tanh_form);
      kernels::gelu_backward<double>(want_dx.data(), widen(dy).data(), widen(x).data(), std::int64_t(count), tanh_form);
      backend.gelu_forward(y, x, tanh_form);
      backend.gelu_backward(dx, dy, x, tanh_form);
      // The CPU fp32 path evaluates tanh and erf with vectorized approximations (about 2e-6).
      require_close("y", y, want_y, 1e-5), require_close("dx", dx, want_dx, 1e-5);
    }
}

void check_embedding(kernel_backend& backend) {
  std::mt19937 rng(41);
  // One shard [vocab_start, vocab_end) of a vocabulary of 50: ids outside it give zero rows and
  // no gradient; repeated ids add up.
  for (auto [n, hidden, beta] : {std::tuple{1, 1, 0.f}, {9, 33, 0.f}, {100, 257, 1.f}}) {
    INFO(backend.name() << " embedding n=" << n << " hidden=" << hidden << " beta=" << beta);
    const int vocab_start = 10, vocab_end = 40, rows = vocab_end - vocab_start;
    std::uniform_int_distribution<int> token(0, 49);
    ids tokens(n);
    for (auto& t : tokens) t = token(rng);
    const floats table = random_floats(std::size_t(rows) * hidden, rng);
    const floats dout = random_floats(std::size_t(n) * hidden, rng);
    floats out = random_floats(std::size_t(n) * hidden, rng), dtable = random_floats(table.size(), rng);
    doubles want_out = widen(out), want_dtable = widen(dtable);
    kernels::embedding_forward<double>(want_out.data(), widen(table).data(), tokens.data(), n, hidden, vocab_start,
                                       vocab_end, beta);
    kernels::embedding_backward<double>(want_dtable.data(), widen(dout).data(), tokens.data(), n, hidden, vocab_start,
                                        vocab_end);
    backend.embedding_forward(out, table, tokens, n, hidden, vocab_start, vocab_end, beta);
    backend.embedding_backward(dtable, dout, tokens, n, hidden, vocab_start, vocab_end);
    require_close("out", out, want_out, 1e-6), require_close("dtable", dtable, want_dtable, 1e-5);
  }
}

void check_cross_entropy(kernel_backend& backend) {
  std::mt19937 rng(51);
  for (auto [n, v] : {std::pair{1, 1}, {5, 31}, {33, 1000}, {4, 50257}}) {
    INFO(backend.name() << " cross_entropy n=" << n << " v=" << v);
    const int vocab_start = 3;  // a shard: some labels fall outside it
    std::uniform_int_distribution<int> label(0, v + 5);
    ids labels(n);
    for (auto& l : labels) l = label(rng);
    floats logits = random_floats(std::size_t(n) * v, rng, 8.f), grad_scale = random_floats(n, rng), loss(n);
    doubles want_logits = widen(logits), row_max(n), sum_exp(n), target(n), want_loss(n);
    const doubles scale64 = widen(grad_scale);
    kernels::cross_entropy_row_max<double>(row_max.data(), want_logits.data(), n, v);
    kernels::cross_entropy_shard_sums<double>(sum_exp.data(), target.data(), want_logits.data(), row_max.data(),
                                              labels.data(), n, v, vocab_start);
    kernels::cross_entropy_loss<double>(want_loss.data(), sum_exp.data(), row_max.data(), target.data(), n);
    kernels::cross_entropy_backward<double>(want_logits.data(), sum_exp.data(), labels.data(), scale64.data(), n, v,
                                            vocab_start);
    backend.cross_entropy(loss, logits, labels, grad_scale, n, v, vocab_start);
    require_close("loss", loss, want_loss, 1e-5), require_close("dlogits", logits, want_logits, 1e-6);
  }
}

void check_rope(kernel_backend& backend) {
  std::mt19937 rng(61);
  // Partial rotation (rot_dim < head_dim), GQA groups, rows wider than the heads (a fused QKV
  // row), both pair layouts and both directions.
  const rope_layout layouts[] = {{1, 1, 1, 1, 2, 2, 2, 2},
                                 {5, 3, 2, 3, 16, 8, 2 * 3 * 16 + 7, 3 * 16},
                                 {33, 2, 4, 2, 64, 64, 4 * 2 * 64, 2 * 64}};
  for (const auto& r : layouts)
    for (const bool interleaved : {false, true})
      for (const bool inverse : {false, true}) {
        INFO(backend.name() << " rope seq=" << r.seq << " head_dim=" << r.head_dim << " rot_dim=" << r.rot_dim
                            << " interleaved=" << interleaved << " inverse=" << inverse);
        floats cos(std::size_t(r.seq) * r.rot_dim / 2), sin(cos.size());
        kernels::rope_tables<float>(cos.data(), sin.data(), r.seq, r.rot_dim, kernels::rope_frequencies{});
        floats x = random_floats(std::size_t(r.seq) * r.batch * r.row_stride, rng);
        doubles want = widen(x);
        kernels::rope_apply<double>(want.data(), widen(cos).data(), widen(sin).data(), r.seq, r.batch, r.groups,
                                    r.heads_per_group, r.head_dim, r.rot_dim, r.row_stride, r.group_stride,
                                    interleaved, inverse);
        backend.rope_apply(x, cos, sin, r, interleaved, inverse);
        require_close("x", x, want, 1e-6);
      }
}

namespace {

// Textbook Adam/AdamW in double: the second implementation the backends are held to.
void reference_adam(std::vector<doubles>& values, std::vector<doubles>& m, std::vector<doubles>& v,
                    const std::vector<std::vector<floats>>& grads, const adam_settings& a) {
  for (std::size_t step = 1; step <= grads.size(); ++step) {
    const double bc1 = 1 - std::pow(a.beta1, double(step)), bc2 = 1 - std::pow(a.beta2, double(step));
    for (std::size_t t = 0; t < values.size(); ++t)
      for (std::size_t i = 0; i < values[t].size(); ++i) {
        double g = grads[step - 1][t][i];
        double& p = values[t][i];
        if (a.decoupled_weight_decay) p *= 1 - a.lr * a.weight_decay;
        else g += a.weight_decay * p;
        m[t][i] = a.beta1 * m[t][i] + (1 - a.beta1) * g;
        v[t][i] = a.beta2 * v[t][i] + (1 - a.beta2) * g * g;
        p -= a.lr / bc1 * m[t][i] / (std::sqrt(v[t][i]) / std::sqrt(bc2) + a.eps);
      }
  }
}

}  // namespace

void check_adam(kernel_backend& backend) {
  std::mt19937 rng(71);
  // Tensors of odd sizes, one larger than a chunk of the multi-tensor kernel, 40 of them so a
  // step needs more than one launch.
  std::vector<std::size_t> sizes = {1, 7, 1000, 65537 * 2 + 3};
  for (int i = 0; i < 36; ++i) sizes.push_back(std::size_t(3 + 17 * i));
  for (const bool decoupled : {true, false}) {
    INFO(backend.name() << " adam decoupled=" << decoupled);
    adam_settings settings;
    settings.decoupled_weight_decay = decoupled;
    std::vector<floats> values, m(sizes.size()), v(sizes.size());
    for (auto n : sizes) values.push_back(random_floats(n, rng));
    std::vector<std::vector<floats>> grads(3);
    for (auto& step : grads)
      for (auto n : sizes) step.push_back(random_floats(n, rng, 0.01f));
    std::vector<doubles> want_values, want_m, want_v;
    for (const auto& t : values) {
      want_values.push_back(widen(t));
      want_m.emplace_back(t.size()), want_v.emplace_back(t.size());
    }
    reference_adam(want_values, want_m, want_v, grads, settings);
    backend.adam(values, m, v, grads, settings);
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      INFO("tensor " << t << " of " << sizes[t] << " elements");
      require_close("value", values[t], want_values[t], 1e-6);
      require_close("exp_avg", m[t], want_m[t], 1e-6), require_close("exp_avg_sq", v[t], want_v[t], 1e-6);
    }
  }
}

}  // namespace mactor::testing
