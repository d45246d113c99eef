// SSD chunked scan forward: per chunk, y = (C B^T o decay mask) x through GEMMs, plus the state
// entering the chunk read out by C; the state is then decayed and updated once per chunk.
#include "kernels/ssd_scan.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/ssd_chunk.hpp"
#include "kernels/gemm.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::kernels {
namespace {

template <typename T>
struct forward_scratch {
  std::vector<T> M, L, tmp, dt, cum;
  explicit forward_scratch(const ssd_shape& s)
      : M(std::size_t(s.chunk) * s.chunk), L(M.size()), tmp(std::size_t(s.chunk) * s.head_dim),
        dt(s.chunk), cum(s.chunk) {}
};

// One head's chunk: y over its rows, and the state entering the next chunk.
template <typename T>
void forward_block(T* y, T* states, const T* x, const T* dt_raw, T A, const T* B, const T* C,
                   T D, T bias, const T* G, const detail::ssd_block& k, forward_scratch<T>& w) {
  const int q = k.q, P = k.s.head_dim, N = k.s.state, ldx = k.ldx(), ldbc = k.ldbc();
  detail::chunk_decay(w.dt.data(), w.cum.data(), dt_raw, bias, A, k);
  detail::decay_mask(w.M.data(), w.L.data(), G, w.dt.data(), w.cum.data(), q);
  T* yk = y + k.x_at();
  const T* xk = x + k.x_at();
  gemm<T>(false, false, q, P, q, T(1), w.M.data(), q, xk, ldx, T(0), yk, ldx);
  const T* h0 = states + k.state_at(k.c);
  if (k.c > 0) {  // y_i += exp(cum_i) h0 C_i
    gemm<T>(false, true, q, P, N, T(1), C + k.bc_at(), ldbc, h0, N, T(0), w.tmp.data(), P);
    for (int i = 0; i < q; ++i) {
      const T e = detail::decay_exp(w.cum[i]);
      for (int p = 0; p < P; ++p) yk[std::int64_t(i) * ldx + p] += e * w.tmp[i * P + p];
    }
  }
  for (int i = 0; i < q; ++i)
    for (int p = 0; p < P; ++p) yk[std::int64_t(i) * ldx + p] += D * xk[std::int64_t(i) * ldx + p];
  if (k.c + 1 == k.s.num_chunks()) return;
  // h1 = exp(cum_last) h0 + sum_j exp(cum_last - cum_j) dt_j x_j B_j^T
  T* h1 = states + k.state_at(k.c + 1);
  const T last = w.cum[q - 1];
  for (int e = 0; e < P * N; ++e) h1[e] = detail::decay_exp(last) * h0[e];
  for (int j = 0; j < q; ++j) {
    const T wj = detail::decay_exp(last - w.cum[j]) * w.dt[j];
    for (int p = 0; p < P; ++p) w.tmp[j * P + p] = wj * xk[std::int64_t(j) * ldx + p];
  }
  gemm<T>(true, false, P, N, q, T(1), w.tmp.data(), P, B + k.bc_at(), ldbc, T(1), h1, N);
}

}  // namespace

namespace detail {

template <typename T>
std::vector<T> gram_matrices(const T* B, const T* C, const ssd_shape& s) {
  const int chunks = s.num_chunks();
  std::vector<T> G(std::size_t(s.batch) * s.groups * chunks * s.chunk * s.chunk);
#pragma omp parallel for schedule(static) collapse(3)
  for (int b = 0; b < s.batch; ++b)
    for (int g = 0; g < s.groups; ++g)
      for (int c = 0; c < chunks; ++c) {
        const ssd_block k(s, b, g * (s.heads / s.groups), c);
        gemm<T>(false, true, k.q, k.q, s.state, T(1), C + k.bc_at(), k.ldbc(), B + k.bc_at(),
                k.ldbc(), T(0), G.data() + k.gram_at(), k.q);
      }
  return G;
}

template std::vector<float> gram_matrices<float>(const float*, const float*, const ssd_shape&);
template std::vector<double> gram_matrices<double>(const double*, const double*,
                                                   const ssd_shape&);

}  // namespace detail

template <typename T>
void ssd_scan_forward(T* y, T* states, const T* x, const T* dt_raw, const T* A_log, const T* B,
                      const T* C, const T* D, const T* dt_bias, const ssd_shape& s) {
  const std::vector<T> G = detail::gram_matrices(B, C, s);
#pragma omp parallel for schedule(dynamic) collapse(2)
  for (int b = 0; b < s.batch; ++b) {
    for (int hd = 0; hd < s.heads; ++hd) {  // heads are independent; chunks run in order
      forward_scratch<T> w(s);
      const detail::ssd_block first(s, b, hd, 0);
      std::fill_n(states + first.state_at(0), std::int64_t(s.head_dim) * s.state, T(0));
      for (int c = 0; c < s.num_chunks(); ++c) {
        const detail::ssd_block k(s, b, hd, c);
        forward_block(y, states, x, dt_raw, -std::exp(A_log[hd]), B, C, D[hd], dt_bias[hd],
                      G.data() + k.gram_at(), k, w);
      }
    }
  }
}

template void ssd_scan_forward<float>(float*, float*, const float*, const float*, const float*,
                                      const float*, const float*, const float*, const float*,
                                      const ssd_shape&);
template void ssd_scan_forward<double>(double*, double*, const double*, const double*,
                                       const double*, const double*, const double*,
                                       const double*, const double*, const ssd_shape&);

void ssd_scan_forward(tensor::tensor_view y, tensor::tensor_view states,
                      tensor::const_tensor_view x, tensor::const_tensor_view dt_raw,
                      tensor::const_tensor_view A_log, tensor::const_tensor_view B,
                      tensor::const_tensor_view C, tensor::const_tensor_view D,
                      tensor::const_tensor_view dt_bias, const ssd_shape& s) {
  const char* k = "ssd_scan_forward";
  check_compatible(k, {y, states, x, dt_raw, A_log, B, C, D, dt_bias});
  const std::int64_t rows = std::int64_t(s.batch) * s.seq, xn = rows * s.heads * s.head_dim;
  detail::need(k, "y", y, xn), detail::need(k, "x", x, xn);
  detail::need(k, "states", states, s.states_size());
  detail::need(k, "dt_raw", dt_raw, rows * s.heads);
  detail::need(k, "B", B, rows * s.groups * s.state), detail::need(k, "C", C, rows * s.groups * s.state);
  detail::need(k, "A_log", A_log, s.heads), detail::need(k, "D", D, s.heads);
  detail::need(k, "dt_bias", dt_bias, s.heads);
  if (on_device(y)) return device_kernels_for(k, y).ssd_scan_forward(y, states, x, dt_raw, A_log, B, C, D, dt_bias, s);
  detail::fp32_stage stage;
  dispatch_compute(k, y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    ssd_scan_forward<T>(stage.output<T>(y, xn), stage.output<T>(states, s.states_size()),
                        stage.typed<T>(x), stage.typed<T>(dt_raw), stage.typed<T>(A_log),
                        stage.typed<T>(B), stage.typed<T>(C), stage.typed<T>(D),
                        stage.typed<T>(dt_bias), s);
  });
}

}  // namespace mactor::kernels
