// Attention core on the CPU: one OpenMP task per (batch, query group), so the heads sharing a
// key/value head accumulate its gradient in one thread; GEMMs run single-threaded inside.
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

// Row-wise causal softmax in place: s[i, j] for j <= i, zero above the diagonal.
template <typename T>
void causal_softmax(T* s, int seq) {
  for (int i = 0; i < seq; ++i) {
    T* row = s + std::int64_t(i) * seq;
    T mx = -std::numeric_limits<T>::infinity();
    for (int j = 0; j <= i; ++j) mx = std::max(mx, row[j]);
    T sum = 0;
    for (int j = 0; j <= i; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const T inv = T(1) / sum;
    for (int j = 0; j <= i; ++j) row[j] *= inv;
    for (int j = i + 1; j < seq; ++j) row[j] = T(0);
  }
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, const attention_dims& d, T scale,
                       float dropout_p, std::uint64_t stream) {
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
        // Causal: query rows [r0, r1) only see keys [0, r1).
        for (int r0 = 0; r0 < d.seq; r0 += row_block) {
          const int r1 = std::min(d.seq, r0 + row_block);
          gemm<T>(false, true, r1 - r0, r1, d.head_dim, scale, qkv + at.q + std::int64_t(r0) * ld,
                  ld, qkv + at.k, ld, T(0), p + std::int64_t(r0) * d.seq, d.seq);
        }
        causal_softmax(p, d.seq);
        const T* pv = p;
        if (dropout_p > 0) {
          apply_dropout(dropped.data(), p, d.seq, dropout_p, stream, mask_base(d, b, h));
          pv = dropped.data();
        }
        for (int r0 = 0; r0 < d.seq; r0 += row_block) {
          const int r1 = std::min(d.seq, r0 + row_block);
          gemm<T>(false, false, r1 - r0, d.head_dim, r1, T(1), pv + std::int64_t(r0) * d.seq, d.seq,
                  qkv + at.v, ld, T(0), out + at.o + std::int64_t(r0) * ldo, ldo);
        }
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs,
                        const attention_dims& d, T scale, float dropout_p, std::uint64_t stream) {
  const int per_group = d.heads / d.groups;
  const int ld = int(std::int64_t(d.batch) * d.qkv_width());
  const int ldo = d.batch * d.heads * d.head_dim;
  const std::int64_t ss = std::int64_t(d.seq) * d.seq;
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
        // dV += P'^T dO ; dP' = dO V^T, over the causal blocks only (dP' above the diagonal is
        // left unset and zeroed below).
        for (int r0 = 0; r0 < d.seq; r0 += row_block) {
          const int r1 = std::min(d.seq, r0 + row_block);
          gemm<T>(true, false, r1, d.head_dim, r1 - r0, T(1), pv + std::int64_t(r0) * d.seq, d.seq,
                  dout + at.o + std::int64_t(r0) * ldo, ldo, T(1), dqkv + at.v, ld);
          gemm<T>(false, true, r1 - r0, r1, d.head_dim, T(1), dout + at.o + std::int64_t(r0) * ldo,
                  ldo, qkv + at.v, ld, T(0), dp.data() + std::int64_t(r0) * d.seq, d.seq);
        }
        if (dropout_p > 0)
          apply_dropout(dp.data(), dp.data(), d.seq, dropout_p, stream, mask_base(d, b, h));
        // dS = P * (dP - rowsum(P * dP)), causal part only.
        for (int i = 0; i < d.seq; ++i) {
          T* row = dp.data() + std::int64_t(i) * d.seq;
          const T* prow = p + std::int64_t(i) * d.seq;
          T dot = 0;
          for (int k = 0; k <= i; ++k) dot += prow[k] * row[k];
          for (int k = 0; k <= i; ++k) row[k] = prow[k] * (row[k] - dot);
          for (int k = i + 1; k < d.seq; ++k) row[k] = T(0);
        }
        // dQ = scale * dS K ; dK += scale * dS^T Q
        for (int r0 = 0; r0 < d.seq; r0 += row_block) {
          const int r1 = std::min(d.seq, r0 + row_block);
          const T* ds = dp.data() + std::int64_t(r0) * d.seq;
          gemm<T>(false, false, r1 - r0, d.head_dim, r1, scale, ds, d.seq, qkv + at.k, ld, T(0),
                  dqkv + at.q + std::int64_t(r0) * ld, ld);
          gemm<T>(true, false, r1, d.head_dim, r1 - r0, scale, ds, d.seq,
                  qkv + at.q + std::int64_t(r0) * ld, ld, T(1), dqkv + at.k, ld);
        }
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, const attention_dims&, float,
                                       float, std::uint64_t);
template void attention_forward<double>(double*, double*, const double*, const attention_dims&,
                                        double, float, std::uint64_t);
template void attention_backward<float>(float*, const float*, const float*, const float*,
                                        const attention_dims&, float, float, std::uint64_t);
template void attention_backward<double>(double*, const double*, const double*, const double*,
                                         const attention_dims&, double, float, std::uint64_t);


namespace {
std::int64_t rows_of(const attention_dims& d) { return std::int64_t(d.seq) * d.batch; }
std::int64_t probs_of(const attention_dims& d) {
  return std::int64_t(d.batch) * d.heads * d.seq * d.seq;
}
}  // namespace

void attention_forward(tensor::tensor_view out, tensor::tensor_view probs,
                       tensor::const_tensor_view qkv, const attention_dims& dims, double scale,
                       float dropout_p, std::uint64_t dropout_stream) {
  const char* k = "attention_forward";
  check_compatible(k, {out, probs, qkv});
  detail::need(k, "out", out, rows_of(dims) * dims.heads * dims.head_dim);
  detail::need(k, "probs", probs, probs_of(dims));
  detail::need(k, "qkv", qkv, rows_of(dims) * dims.qkv_width());
  detail::fp32_stage stage;
  dispatch_compute(k, out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    attention_forward<T>(stage.output<T>(out, rows_of(dims) * dims.heads * dims.head_dim),
                         stage.output<T>(probs, probs_of(dims)), stage.typed<T>(qkv),
                         dims, T(scale), dropout_p, dropout_stream);
  });
}

void attention_backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                        tensor::const_tensor_view qkv, tensor::const_tensor_view probs,
                        const attention_dims& dims, double scale, float dropout_p,
                        std::uint64_t dropout_stream) {
  const char* k = "attention_backward";
  check_compatible(k, {dqkv, dout, qkv, probs});
  detail::need(k, "dqkv", dqkv, rows_of(dims) * dims.qkv_width());
  detail::need(k, "dout", dout, rows_of(dims) * dims.heads * dims.head_dim);
  detail::need(k, "qkv", qkv, rows_of(dims) * dims.qkv_width());
  detail::need(k, "probs", probs, probs_of(dims));
  detail::fp32_stage stage;
  dispatch_compute(k, dqkv.type, dqkv.where, [&](auto zero) {
    using T = decltype(zero);
    attention_backward<T>(stage.typed<T>(dqkv), stage.typed<T>(dout), stage.typed<T>(qkv),
                          stage.typed<T>(probs), dims, T(scale), dropout_p, dropout_stream);
  });
}

}  // namespace mactor::kernels
