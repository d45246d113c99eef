// Attention core on the CPU: one OpenMP task per (batch, query group), so the heads sharing a
// key/value head accumulate its gradient in one thread; GEMMs run single-threaded inside, over
// the blocks of keys a block of query rows can see (causal, and the sliding window's start).
#include "kernels/attention.hpp"
#include "kernels/cpu/typed.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/dropout.hpp"
#include "kernels/gemm.hpp"
#include "kernels/threads.hpp"

namespace mactor::kernels {
namespace {

// Query rows per causal block: a block of rows needs keys only up to its last row.
constexpr int row_block = 64;

// Offsets of one head's q, k, v inside a qkv row, and of its output inside an out row.
struct head_view {
  std::int64_t q, k, v, o;
};

head_view locate(const attention_dims& d, int b, int g, int j) {
  const int per_group = d.heads / d.groups;
  const std::int64_t row = std::int64_t(b) * d.qkv_width();
  const std::int64_t group = row + std::int64_t(g) * (per_group + 2) * d.head_dim;
  const int h = g * per_group + j;
  return {group + std::int64_t(j) * d.head_dim, group + std::int64_t(per_group) * d.head_dim,
          group + std::int64_t(per_group + 1) * d.head_dim,
          (std::int64_t(b) * d.heads + h) * d.head_dim};
}

// Tiny problems (tests) stay on one thread: waking a team costs more than the work.
bool worth_threads(const attention_dims& d) {
  return std::int64_t(d.batch) * d.heads * d.seq * d.seq * d.head_dim > (1 << 16) &&
         d.batch * d.groups > 1;
}

std::uint64_t mask_base(const attention_dims& d, int b, int h) {
  return (std::uint64_t(b) * d.total_heads + d.head_offset + h) * std::uint64_t(d.seq) * d.seq;
}

// p'[i, j] = keep ? p / (1 - p_drop) : 0 for the causal part of one head's probabilities.
template <typename T>
void apply_dropout(T* dst, const T* src, int seq, float p, std::uint64_t stream,
                   std::uint64_t base) {
  const T scale = T(1) / (T(1) - T(p));
  for (int i = 0; i < seq; ++i)
    for (int j = 0; j < seq; ++j) {
      const std::int64_t at = std::int64_t(i) * seq + j;
      dst[at] = dropout_uniform(stream, base + at) >= p ? src[at] * scale : T(0);
    }
}

// First key query row i sees: 0, or i - window with a sliding window.
int first_key(const attention_dims& d, int i) { return d.window < 0 ? 0 : std::max(0, i - d.window); }

// Row-wise masked softmax in place: s[i, j] for first_key(i) <= j <= i, zero elsewhere; with a
// sink logit, exp(sink) joins the denominator.
template <typename T>
void masked_softmax(T* s, const attention_dims& d, const T* sink) {
  for (int i = 0; i < d.seq; ++i) {
    T* row = s + std::int64_t(i) * d.seq;
    const int lo = first_key(d, i);
    T mx = sink ? *sink : -std::numeric_limits<T>::infinity();
    for (int j = lo; j <= i; ++j) mx = std::max(mx, row[j]);
    T sum = sink ? std::exp(*sink - mx) : T(0);
    for (int j = lo; j <= i; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const T inv = T(1) / sum;
    for (int j = lo; j <= i; ++j) row[j] *= inv;
    std::fill(row, row + lo, T(0));
    std::fill(row + i + 1, row + d.seq, T(0));
  }
}

// dS = P * (dP - rowsum(P * dP)) over the visible keys, zero elsewhere; returns the sink
// logit's gradient -sum_i p_sink[i] * rowsum_i (p_sink = 1 - rowsum(P)).
template <typename T>
T softmax_backward(T* dp, const T* p, const attention_dims& d) {
  T dsink = 0;
  for (int i = 0; i < d.seq; ++i) {
    T* row = dp + std::int64_t(i) * d.seq;
    const T* prow = p + std::int64_t(i) * d.seq;
    const int lo = first_key(d, i);
    T dot = 0, mass = 0;
    for (int k = lo; k <= i; ++k) dot += prow[k] * row[k], mass += prow[k];
    for (int k = lo; k <= i; ++k) row[k] = prow[k] * (row[k] - dot);
    std::fill(row, row + lo, T(0));
    std::fill(row + i + 1, row + d.seq, T(0));
    dsink -= (T(1) - mass) * dot;
  }
  return dsink;
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, const attention_dims& d, T scale,
                       float dropout_p, std::uint64_t stream, const T* sink) {
  const int per_group = d.heads / d.groups;
  const int ld = int(std::int64_t(d.batch) * d.qkv_width());
  const int ldo = d.batch * d.heads * d.head_dim;
  const std::int64_t ss = std::int64_t(d.seq) * d.seq;
  blas_single_thread_scope single_blas;
#pragma omp parallel if (worth_threads(d))
  {
    std::vector<T> dropped(dropout_p > 0 ? ss : 0);
#pragma omp for schedule(dynamic)
    for (int unit = 0; unit < d.batch * d.groups; ++unit) {
      const int b = unit / d.groups, g = unit % d.groups;
      for (int j = 0; j < per_group; ++j) {
        const int h = g * per_group + j;
        const head_view at = locate(d, b, g, j);
        T* p = probs + (std::int64_t(b) * d.heads + h) * ss;
        // Query rows [r0, r1) only see keys [k0, r1): causal, and the window's start.
        for (int r0 = 0; r0 < d.seq; r0 += row_block) {
          const int r1 = std::min(d.seq, r0 + row_block), k0 = first_key(d, r0);
          gemm<T>(false, true, r1 - r0, r1 - k0, d.head_dim, scale,
                  qkv + at.q + std::int64_t(r0) * ld, ld, qkv + at.k + std::int64_t(k0) * ld, ld,
                  T(0), p + std::int64_t(r0) * d.seq + k0, d.seq);
        }
        masked_softmax(p, d, sink ? sink + h : nullptr);
        const T* pv = p;
        if (dropout_p > 0) {
          apply_dropout(dropped.data(), p, d.seq, dropout_p, stream, mask_base(d, b, h));
          pv = dropped.data();
        }
        for (int r0 = 0; r0 < d.seq; r0 += row_block) {
          const int r1 = std::min(d.seq, r0 + row_block), k0 = first_key(d, r0);
          gemm<T>(false, false, r1 - r0, d.head_dim, r1 - k0, T(1),
                  pv + std::int64_t(r0) * d.seq + k0, d.seq, qkv + at.v + std::int64_t(k0) * ld, ld,
                  T(0), out + at.o + std::int64_t(r0) * ldo, ldo);
        }
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs,
                        const attention_dims& d, T scale, float dropout_p, std::uint64_t stream,
                        const T* sink, T* dsink) {
  const int per_group = d.heads / d.groups;
  const int ld = int(std::int64_t(d.batch) * d.qkv_width());
  const int ldo = d.batch * d.heads * d.head_dim;
  const std::int64_t ss = std::int64_t(d.seq) * d.seq;
  // Each (batch, head)'s sink gradient, summed over the batch in a fixed order afterwards.
  std::vector<T> sink_grads(sink && dsink ? std::size_t(d.batch) * d.heads : 0);
  blas_single_thread_scope single_blas;
#pragma omp parallel if (worth_threads(d))
  {
    std::vector<T> dp(ss), dropped(dropout_p > 0 ? ss : 0);
#pragma omp for schedule(dynamic)
    for (int unit = 0; unit < d.batch * d.groups; ++unit) {
      const int b = unit / d.groups, g = unit % d.groups;
      const head_view first = locate(d, b, g, 0);
      for (int i = 0; i < d.seq; ++i)  // dK and dV of this group are accumulated below.
        std::fill_n(dqkv + first.k + std::int64_t(i) * ld, 2 * d.head_dim, T(0));
      for (int j = 0; j < per_group; ++j) {
        const int h = g * per_group + j;
        const head_view at = locate(d, b, g, j);
        const T* p = probs + (std::int64_t(b) * d.heads + h) * ss;
        const T* pv = p;
        if (dropout_p > 0) {
          apply_dropout(dropped.data(), p, d.seq, dropout_p, stream, mask_base(d, b, h));
          pv = dropped.data();
        }
        // dV += P'^T dO ; dP' = dO V^T, over the visible blocks only (the rest of dP' is left
        // unset and zeroed by softmax_backward).
        for (int r0 = 0; r0 < d.seq; r0 += row_block) {
          const int r1 = std::min(d.seq, r0 + row_block), k0 = first_key(d, r0);
          gemm<T>(true, false, r1 - k0, d.head_dim, r1 - r0, T(1),
                  pv + std::int64_t(r0) * d.seq + k0, d.seq, dout + at.o + std::int64_t(r0) * ldo,
                  ldo, T(1), dqkv + at.v + std::int64_t(k0) * ld, ld);
          gemm<T>(false, true, r1 - r0, r1 - k0, d.head_dim, T(1),
                  dout + at.o + std::int64_t(r0) * ldo, ldo, qkv + at.v + std::int64_t(k0) * ld, ld,
                  T(0), dp.data() + std::int64_t(r0) * d.seq + k0, d.seq);
        }
        if (dropout_p > 0)
          apply_dropout(dp.data(), dp.data(), d.seq, dropout_p, stream, mask_base(d, b, h));
        const T ds = softmax_backward(dp.data(), p, d);
        if (!sink_grads.empty()) sink_grads[std::size_t(b) * d.heads + h] = ds;
        // dQ = scale * dS K ; dK += scale * dS^T Q
        for (int r0 = 0; r0 < d.seq; r0 += row_block) {
          const int r1 = std::min(d.seq, r0 + row_block), k0 = first_key(d, r0);
          const T* dsr = dp.data() + std::int64_t(r0) * d.seq + k0;
          gemm<T>(false, false, r1 - r0, d.head_dim, r1 - k0, scale, dsr, d.seq,
                  qkv + at.k + std::int64_t(k0) * ld, ld, T(0), dqkv + at.q + std::int64_t(r0) * ld,
                  ld);
          gemm<T>(true, false, r1 - k0, d.head_dim, r1 - r0, scale, dsr, d.seq,
                  qkv + at.q + std::int64_t(r0) * ld, ld, T(1), dqkv + at.k + std::int64_t(k0) * ld,
                  ld);
        }
      }
    }
  }
  if (sink_grads.empty()) return;
  for (int b = 0; b < d.batch; ++b)
    for (int h = 0; h < d.heads; ++h) dsink[h] += sink_grads[std::size_t(b) * d.heads + h];
}

template void attention_forward<float>(float*, float*, const float*, const attention_dims&, float,
                                       float, std::uint64_t, const float*);
template void attention_forward<double>(double*, double*, const double*, const attention_dims&,
                                        double, float, std::uint64_t, const double*);
template void attention_backward<float>(float*, const float*, const float*, const float*,
                                        const attention_dims&, float, float, std::uint64_t,
                                        const float*, float*);
template void attention_backward<double>(double*, const double*, const double*, const double*,
                                         const attention_dims&, double, float, std::uint64_t,
                                         const double*, double*);


namespace {
std::int64_t rows_of(const attention_dims& d) { return std::int64_t(d.seq) * d.batch; }
std::int64_t probs_of(const attention_dims& d) {
  return std::int64_t(d.batch) * d.heads * d.seq * d.seq;
}
}  // namespace

void attention_forward(tensor::tensor_view out, tensor::tensor_view probs,
                       tensor::const_tensor_view qkv, const attention_dims& dims, double scale,
                       float dropout_p, std::uint64_t dropout_stream,
                       tensor::const_tensor_view sink) {
  const char* k = "attention_forward";
  check_compatible(k, {out, probs, qkv, sink});
  detail::need_optional(k, "sink", sink, dims.heads);
  detail::need(k, "out", out, rows_of(dims) * dims.heads * dims.head_dim);
  detail::need(k, "probs", probs, probs_of(dims));
  detail::need(k, "qkv", qkv, rows_of(dims) * dims.qkv_width());
  detail::fp32_stage stage;
  dispatch_compute(k, out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    attention_forward<T>(stage.output<T>(out, rows_of(dims) * dims.heads * dims.head_dim),
                         stage.output<T>(probs, probs_of(dims)), stage.typed<T>(qkv),
                         dims, T(scale), dropout_p, dropout_stream, stage.typed<T>(sink));
  });
}

void attention_backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                        tensor::const_tensor_view qkv, tensor::const_tensor_view probs,
                        const attention_dims& dims, double scale, float dropout_p,
                        std::uint64_t dropout_stream, tensor::const_tensor_view sink,
                        tensor::tensor_view dsink) {
  const char* k = "attention_backward";
  check_compatible(k, {dqkv, dout, qkv, probs, sink, dsink});
  detail::need_optional(k, "sink", sink, dims.heads);
  detail::need_optional(k, "dsink", dsink, dims.heads);
  detail::need(k, "dqkv", dqkv, rows_of(dims) * dims.qkv_width());
  detail::need(k, "dout", dout, rows_of(dims) * dims.heads * dims.head_dim);
  detail::need(k, "qkv", qkv, rows_of(dims) * dims.qkv_width());
  detail::need(k, "probs", probs, probs_of(dims));
  detail::fp32_stage stage;
  dispatch_compute(k, dqkv.type, dqkv.where, [&](auto zero) {
    using T = decltype(zero);
    attention_backward<T>(stage.typed<T>(dqkv), stage.typed<T>(dout), stage.typed<T>(qkv),
                          stage.typed<T>(probs), dims, T(scale), dropout_p, dropout_stream,
                          stage.typed<T>(sink), stage.typed<T>(dsink));
  });
}

}  // namespace mactor::kernels
