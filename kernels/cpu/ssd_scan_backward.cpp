// SSD chunked scan backward: chunks in reverse, carrying each head's state gradient dH back
// through the chunk-entry states saved by the forward. Gradients through the decay go to the
// cumulative log-decay first (d cum), then to each step's dt by a reverse cumulative sum.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/cpu/ssd_chunk.hpp"
#include "kernels/gemm.hpp"
#include "kernels/ssd_scan.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::kernels {
namespace {

template <typename T>
struct backward_scratch {
  std::vector<T> M, L, dM, tmp, xw, dh_prev, dt, cum, dcum, ddt;
  std::vector<T> dh;  // the head's [p, n] state gradient, carried from chunk to chunk
  const T* G = nullptr;  // this chunk's C B^T
  T* dG = nullptr;       // this head's gradient of it, summed over the group's heads later
  explicit backward_scratch(const ssd_shape& s)
      : M(std::size_t(s.chunk) * s.chunk), L(M.size()), dM(M.size()),
        tmp(std::size_t(s.chunk) * s.head_dim), xw(tmp.size()),
        dh_prev(std::size_t(s.head_dim) * s.state), dt(s.chunk), cum(s.chunk), dcum(s.chunk),
        ddt(s.chunk), dh(std::size_t(s.head_dim) * s.state, T(0)) {}
};

struct head_grads {  // this (batch, head)'s contributions to the parameter gradients
  double dA = 0, dD = 0, dbias = 0;
};

// y_i = sum_j M_ij x_j + D x_i: dx, d cum, d dt and dG through the mask.
template <typename T>
void intra_chunk(T* dx, const T* dy, const T* x, T D, const detail::ssd_block& k,
                 backward_scratch<T>& w, head_grads& pg) {
  const int q = k.q, P = k.s.head_dim, ldx = k.ldx();
  const T* dyk = dy + k.x_at();
  const T* xk = x + k.x_at();
  T* dxk = dx + k.x_at();
  for (int i = 0; i < q; ++i)
    for (int p = 0; p < P; ++p) {
      const std::int64_t o = std::int64_t(i) * ldx + p;
      dxk[o] = D * dyk[o];
      pg.dD += double(dyk[o]) * xk[o];
    }
  gemm<T>(true, false, q, P, q, T(1), w.M.data(), q, dyk, ldx, T(1), dxk, ldx);
  gemm<T>(false, true, q, q, P, T(1), dyk, ldx, xk, ldx, T(0), w.dM.data(), q);
  for (int i = 0; i < q; ++i)
    for (int j = 0; j <= i; ++j) {
      const T dm = w.dM[i * q + j], e = w.L[i * q + j];
      const T t = dm * w.M[i * q + j];
      w.dcum[i] += t, w.dcum[j] -= t;
      w.ddt[j] += dm * w.G[i * q + j] * e;
      w.dG[i * q + j] += dm * e * w.dt[j];
    }
}

// y_i += exp(cum_i) h0 C_i: dC, d cum, and the gradient of h0 from this chunk's outputs.
template <typename T>
void state_readout(T* dC, const T* dy, const T* C, const T* h0, const detail::ssd_block& k,
                   backward_scratch<T>& w) {
  const int q = k.q, P = k.s.head_dim, N = k.s.state, ldx = k.ldx(), ldbc = k.ldbc();
  const T* dyk = dy + k.x_at();
  gemm<T>(false, true, q, P, N, T(1), C + k.bc_at(), ldbc, h0, N, T(0), w.tmp.data(), P);
  for (int i = 0; i < q; ++i) {
    const T e = detail::decay_exp(w.cum[i]);
    T dot = 0;
    for (int p = 0; p < P; ++p) {
      dot += dyk[std::int64_t(i) * ldx + p] * w.tmp[i * P + p];
      w.xw[i * P + p] = e * dyk[std::int64_t(i) * ldx + p];
    }
    w.dcum[i] += e * dot;
  }
  gemm<T>(false, false, q, N, P, T(1), w.xw.data(), P, h0, N, T(1), dC + k.per_head_at(),
          k.ldph());
  gemm<T>(true, false, P, N, q, T(1), w.xw.data(), P, C + k.bc_at(), ldbc, T(0),
          w.dh_prev.data(), N);
}

// h1 = exp(cum_last) h0 + sum_j w_j x_j B_j^T with dh = dL/dh1: dx, dB, d dt, d cum.
template <typename T>
void state_update(T* dx, T* dB, const T* x, const T* B, const T* h0, const T* dh,
                  const detail::ssd_block& k, backward_scratch<T>& w) {
  const int q = k.q, P = k.s.head_dim, N = k.s.state, ldx = k.ldx(), ldbc = k.ldbc();
  const T last = w.cum[q - 1];
  gemm<T>(false, true, q, P, N, T(1), B + k.bc_at(), ldbc, dh, N, T(0), w.tmp.data(), P);
  const T* xk = x + k.x_at();
  T* dxk = dx + k.x_at();
  for (int j = 0; j < q; ++j) {
    const T decay = detail::decay_exp(last - w.cum[j]), wj = decay * w.dt[j];
    T dw = 0;
    for (int p = 0; p < P; ++p) {
      const std::int64_t o = std::int64_t(j) * ldx + p;
      dxk[o] += wj * w.tmp[j * P + p];
      dw += xk[o] * w.tmp[j * P + p];
      w.xw[j * P + p] = wj * xk[o];
    }
    w.ddt[j] += dw * decay;
    w.dcum[q - 1] += dw * wj, w.dcum[j] -= dw * wj;
  }
  gemm<T>(false, false, q, N, P, T(1), w.xw.data(), P, dh, N, T(1), dB + k.per_head_at(),
          k.ldph());
  if (k.c == 0) return;  // h0 = 0
  T inner = 0;
  for (int e = 0; e < P * N; ++e) inner += dh[e] * h0[e];
  w.dcum[q - 1] += detail::decay_exp(last) * inner;
}

// One head's chunk, given its dh (the gradient of the state leaving the chunk); leaves in dh
// the gradient of the state entering it.
template <typename T>
void backward_block(T* dx, T* ddt_raw, T* dB, T* dC, T* dh, const T* dy, const T* states,
                    const T* x, const T* dt_raw, T A, const T* B, const T* C, T D, T bias,
                    const detail::ssd_block& k, backward_scratch<T>& w, head_grads& pg) {
  const int q = k.q, PN = k.s.head_dim * k.s.state;
  const bool has_next = k.c + 1 < k.s.num_chunks();
  detail::chunk_decay(w.dt.data(), w.cum.data(), dt_raw, bias, A, k);
  detail::decay_mask(w.M.data(), w.L.data(), w.G, w.dt.data(), w.cum.data(), q);
  std::fill_n(w.dG, q * q, T(0));
  for (int i = 0; i < q; ++i) {
    std::fill_n(dB + k.per_head_at() + std::int64_t(i) * k.ldph(), k.s.state, T(0));
    std::fill_n(dC + k.per_head_at() + std::int64_t(i) * k.ldph(), k.s.state, T(0));
  }
  std::fill_n(w.dcum.begin(), q, T(0));
  std::fill_n(w.ddt.begin(), q, T(0));
  const T* h0 = states + k.state_at(k.c);
  intra_chunk(dx, dy, x, D, k, w, pg);
  if (k.c > 0) state_readout(dC, dy, C, h0, k, w);
  if (has_next) state_update(dx, dB, x, B, h0, dh, k, w);
  if (k.c > 0) {  // dh0 = exp(cum_last) dh1 + readout part
    const T e = has_next ? detail::decay_exp(w.cum[q - 1]) : T(0);
    for (int i = 0; i < PN; ++i) dh[i] = e * dh[i] + w.dh_prev[i];
  }
  T da = 0;  // reverse cumulative sum: cum_i depends on every a_k with k <= i
  for (int i = q - 1; i >= 0; --i) {
    da += w.dcum[i];
    w.ddt[i] += da * A;
    pg.dA += double(da) * w.dt[i];
    const T u = dt_raw[k.dt_at() + std::int64_t(i) * k.s.heads] + bias;
    const T du = w.ddt[i] * (u > T(20) ? T(1) : detail::sigmoid(u));
    ddt_raw[k.dt_at() + std::int64_t(i) * k.s.heads] = du;
    pg.dbias += du;
  }
}

// Sums the per-head dB or dC [b, l, h, n] over each group's heads into [b, l, g, n].
template <typename T>
void sum_over_group_heads(T* out, const std::vector<T>& per_head, const ssd_shape& s) {
  const int per_group = s.heads / s.groups, N = s.state;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < std::int64_t(s.batch) * s.seq; ++r)
    for (int g = 0; g < s.groups; ++g) {
      T* o = out + (r * s.groups + g) * N;
      std::fill_n(o, N, T(0));
      for (int hd = g * per_group; hd < (g + 1) * per_group; ++hd)
        for (int n = 0; n < N; ++n) o[n] += per_head[(r * s.heads + hd) * N + n];
    }
}

// G = C B^T of each (batch, group, chunk): dC += dG B, dB += dG^T C with dG summed over the
// group's heads first, so the two GEMMs run once per group rather than once per head.
template <typename T>
void apply_gram_grads(T* dB, T* dC, const std::vector<T>& dG_heads, const T* B, const T* C,
                      const ssd_shape& s) {
  const int per_group = s.heads / s.groups, chunks = s.num_chunks();
  const std::size_t QQ = std::size_t(s.chunk) * s.chunk;
#pragma omp parallel for schedule(dynamic) collapse(3)
  for (int b = 0; b < s.batch; ++b)
    for (int g = 0; g < s.groups; ++g)
      for (int c = 0; c < chunks; ++c) {
        const detail::ssd_block k(s, b, g * per_group, c);
        std::vector<T> dG(QQ, T(0));
        for (int hd = g * per_group; hd < (g + 1) * per_group; ++hd) {
          const T* src = dG_heads.data() + ((std::size_t(b) * s.heads + hd) * chunks + c) * QQ;
          for (int e = 0; e < k.q * k.q; ++e) dG[e] += src[e];
        }
        gemm<T>(false, false, k.q, s.state, k.q, T(1), dG.data(), k.q, B + k.bc_at(), k.ldbc(),
                T(1), dC + k.bc_at(), k.ldbc());
        gemm<T>(true, false, k.q, s.state, k.q, T(1), dG.data(), k.q, C + k.bc_at(), k.ldbc(),
                T(1), dB + k.bc_at(), k.ldbc());
      }
}

}  // namespace

template <typename T>
void ssd_scan_backward(T* dx, T* ddt_raw, T* dA_log, T* dB, T* dC, T* dD, T* ddt_bias,
                       const T* dy, const T* states, const T* x, const T* dt_raw,
                       const T* A_log, const T* B, const T* C, const T* D, const T* dt_bias,
                       const ssd_shape& s) {
  const std::vector<T> G = detail::gram_matrices(B, C, s);
  const std::size_t per_head_size = std::size_t(s.batch) * s.seq * s.heads * s.state;
  std::vector<T> dB_head(per_head_size), dC_head(per_head_size);
  const std::size_t QQ = std::size_t(s.chunk) * s.chunk;
  std::vector<T> dG_heads(std::size_t(s.batch) * s.heads * s.num_chunks() * QQ);
  std::vector<head_grads> partial(std::size_t(s.batch) * s.heads);
#pragma omp parallel for schedule(dynamic) collapse(2)
  for (int b = 0; b < s.batch; ++b) {
    for (int hd = 0; hd < s.heads; ++hd) {  // heads are independent; chunks run in reverse
      backward_scratch<T> w(s);
      for (int c = s.num_chunks() - 1; c >= 0; --c) {
        const detail::ssd_block k(s, b, hd, c);
        w.G = G.data() + k.gram_at();
        w.dG = dG_heads.data() + ((std::size_t(b) * s.heads + hd) * s.num_chunks() + c) * QQ;
        backward_block(dx, ddt_raw, dB_head.data(), dC_head.data(), w.dh.data(), dy, states, x,
                       dt_raw, -std::exp(A_log[hd]), B, C, D[hd], dt_bias[hd], k, w,
                       partial[std::size_t(b) * s.heads + hd]);
      }
    }
  }
  sum_over_group_heads(dB, dB_head, s);
  sum_over_group_heads(dC, dC_head, s);
  apply_gram_grads(dB, dC, dG_heads, B, C, s);
  for (int b = 0; b < s.batch; ++b)
    for (int hd = 0; hd < s.heads; ++hd) {
      const head_grads& p = partial[std::size_t(b) * s.heads + hd];
      dA_log[hd] += T(p.dA) * -std::exp(A_log[hd]);  // A = -exp(A_log)
      dD[hd] += T(p.dD);
      ddt_bias[hd] += T(p.dbias);
    }
}

template void ssd_scan_backward<float>(float*, float*, float*, float*, float*, float*, float*,
                                       const float*, const float*, const float*, const float*,
                                       const float*, const float*, const float*, const float*,
                                       const float*, const ssd_shape&);
template void ssd_scan_backward<double>(double*, double*, double*, double*, double*, double*,
                                        double*, const double*, const double*, const double*,
                                        const double*, const double*, const double*,
                                        const double*, const double*, const double*,
                                        const ssd_shape&);

void ssd_scan_backward(tensor::tensor_view dx, tensor::tensor_view ddt_raw,
                       tensor::tensor_view dA_log, tensor::tensor_view dB, tensor::tensor_view dC,
                       tensor::tensor_view dD, tensor::tensor_view ddt_bias,
                       tensor::const_tensor_view dy, tensor::const_tensor_view states,
                       tensor::const_tensor_view x, tensor::const_tensor_view dt_raw,
                       tensor::const_tensor_view A_log, tensor::const_tensor_view B,
                       tensor::const_tensor_view C, tensor::const_tensor_view D,
                       tensor::const_tensor_view dt_bias, const ssd_shape& s) {
  const char* k = "ssd_scan_backward";
  check_compatible(k, {dx, ddt_raw, dA_log, dB, dC, dD, ddt_bias, dy, states, x, dt_raw, A_log,
                       B, C, D, dt_bias});
  const std::int64_t rows = std::int64_t(s.batch) * s.seq, xn = rows * s.heads * s.head_dim;
  const std::int64_t bn = rows * s.groups * s.state;
  for (auto [name, v, n] : {std::tuple{"dx", tensor::const_tensor_view(dx), xn}, {"dy", dy, xn},
                            {"x", x, xn}, {"states", states, s.states_size()},
                            {"ddt_raw", ddt_raw, rows * s.heads}, {"dt_raw", dt_raw, rows * s.heads},
                            {"dB", dB, bn}, {"dC", dC, bn}, {"B", B, bn}, {"C", C, bn},
                            {"dA_log", dA_log, s.heads}, {"dD", dD, s.heads},
                            {"ddt_bias", ddt_bias, s.heads}, {"A_log", A_log, s.heads},
                            {"D", D, s.heads}, {"dt_bias", dt_bias, s.heads}})
    detail::need(k, name, v, n);
  if (on_device(dx))
    return device_kernels_for(k, dx).ssd_scan_backward(dx, ddt_raw, dA_log, dB, dC, dD, ddt_bias, dy, states, x,
                                                       dt_raw, A_log, B, C, D, dt_bias, s);
  detail::fp32_stage stage;
  dispatch_compute(k, dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    ssd_scan_backward<T>(stage.output<T>(dx, xn), stage.output<T>(ddt_raw, rows * s.heads),
                         stage.typed<T>(dA_log), stage.output<T>(dB, bn), stage.output<T>(dC, bn),
                         stage.typed<T>(dD), stage.typed<T>(ddt_bias), stage.typed<T>(dy),
                         stage.typed<T>(states), stage.typed<T>(x), stage.typed<T>(dt_raw),
                         stage.typed<T>(A_log), stage.typed<T>(B), stage.typed<T>(C),
                         stage.typed<T>(D), stage.typed<T>(dt_bias), s);
  });
}

}  // namespace mactor::kernels
