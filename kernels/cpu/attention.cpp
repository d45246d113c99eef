// Attention core on the CPU: one OpenMP task per (batch, query group), so the heads sharing a
// key/value head accumulate its gradient in one thread; GEMMs run single-threaded inside, over
// the blocks of keys a block of query rows can see (causal, the sliding window's start, and the
// first row's document start: starts never decrease along a sequence).
#include "kernels/attention.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/cpu/vector_math.hpp"
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
  return std::int64_t(d.batch) * d.heads * d.seq * d.keys() * d.head_dim > (1 << 16) &&
         d.batch * d.groups > 1;
}

std::uint64_t mask_base(const attention_dims& d, int b, int h) {
  const auto keys = std::uint64_t(d.keys());
  return (std::uint64_t(b) * d.total_heads + d.head_offset + h) * keys * keys;
}

// The query rows' runs: dims' own, or the whole sequence.
std::vector<query_run> runs_of(const attention_dims& d) {
  if (d.num_runs == 0) return {query_run{0, 0, d.seq}};
  return {d.runs.begin(), d.runs.begin() + d.num_runs};
}

// Calls f(local row, global position) for every query row.
template <typename F>
void for_each_row(const attention_dims& d, F&& f) {
  for (const auto& r : runs_of(d))
    for (int i = 0; i < r.length; ++i) f(r.local + i, r.global + i);
}

// A block of at most row_block query rows [r0, r1) at global positions [g0, g0 + r1 - r0).
struct row_block_span {
  int r0, r1, g0;
  int g1() const { return g0 + (r1 - r0); }
};

template <typename F>
void for_each_block(const attention_dims& d, F&& f) {
  for (const auto& r : runs_of(d))
    for (int r0 = r.local; r0 < r.local + r.length; r0 += row_block)
      f(row_block_span{r0, std::min(r.local + r.length, r0 + row_block), r.global + (r0 - r.local)});
}

// p'[i, j] = keep ? p / (1 - p_drop) : 0 for the causal part of one head's probabilities; the
// mask element of (i, j) is that of global position (g, j). Keys after g are 0 (masked, or a
// gradient the softmax backward discards) without drawing their mask: half the hashing.
template <typename T>
void apply_dropout(T* dst, const T* src, const attention_dims& d, float p, std::uint64_t stream,
                   std::uint64_t base) {
  const int keys = d.keys();
  for_each_row(d, [&](int i, int g) {
    const int visible = std::min(keys, g + 1);
    T* row = dst + std::int64_t(i) * keys;
    const T* in = src + std::int64_t(i) * keys;
    detail::dropout_scale(row, in, visible, p, stream, base + std::uint64_t(g) * keys);
    std::fill(row + visible, row + keys, T(0));
  });
}

// First key query position g of batch row b sees: 0, g - window with a sliding window, and not
// before its document's start with a document mask.
int first_key(const attention_dims& d, int b, int g) {
  const int window_start = d.window < 0 ? 0 : std::max(0, g - d.window);
  if (!d.document_start) return window_start;
  return std::max(window_start, int(d.document_start[std::int64_t(b) * d.keys() + g]));
}

// The max of row[lo..hi] and of the sink logit (when given); then each row[j] = exp(row[j] - max),
// returning their sum plus exp(sink - max). Float rows through the SIMD helpers of vector_math
// (as the cross-entropy's), double with std::exp.
template <typename T>
T exp_row(T* row, int lo, int hi, const T* sink, T& mx) {
  mx = sink ? *sink : -std::numeric_limits<T>::infinity();
  T sum = 0;
  if constexpr (std::is_same_v<T, float>) {
    mx = std::max(mx, detail::row_max(row + lo, hi - lo + 1));
    sum = detail::exp_shifted_sum(row + lo, hi - lo + 1, mx);
  } else {
    for (int j = lo; j <= hi; ++j) mx = std::max(mx, row[j]);
    for (int j = lo; j <= hi; ++j) sum += (row[j] = std::exp(row[j] - mx));
  }
  return sum + (sink ? std::exp(*sink - mx) : T(0));
}

// Row-wise masked softmax in place: s[i, j] for first_key(b, g) <= j <= g (g: row i's position),
// zero elsewhere; with a sink logit, exp(sink) joins the denominator.
template <typename T>
void masked_softmax(T* s, const attention_dims& d, int b, const T* sink) {
  const int keys = d.keys();
  for_each_row(d, [&](int i, int g) {
    T* row = s + std::int64_t(i) * keys;
    const int lo = first_key(d, b, g);
    T mx;
    const T sum = exp_row(row, lo, g, sink, mx);
    const T inv = T(1) / sum;
    for (int j = lo; j <= g; ++j) row[j] *= inv;
    std::fill(row, row + lo, T(0));
    std::fill(row + g + 1, row + keys, T(0));
  });
}

// dS = P * (dP - rowsum(P * dP)) over the visible keys, zero elsewhere; returns the sink
// logit's gradient -sum_i p_sink[i] * rowsum_i (p_sink = 1 - rowsum(P)).
template <typename T>
T softmax_backward(T* dp, const T* p, const attention_dims& d, int b) {
  T dsink = 0;
  const int keys = d.keys();
  for_each_row(d, [&](int i, int g) {
    T* row = dp + std::int64_t(i) * keys;
    const T* prow = p + std::int64_t(i) * keys;
    const int lo = first_key(d, b, g);
    T dot = 0, mass = 0;
    for (int k = lo; k <= g; ++k) dot += prow[k] * row[k], mass += prow[k];
    for (int k = lo; k <= g; ++k) row[k] = prow[k] * (row[k] - dot);
    std::fill(row, row + lo, T(0));
    std::fill(row + g + 1, row + keys, T(0));
    dsink -= (T(1) - mass) * dot;
  });
  return dsink;
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, const attention_dims& d, T scale,
                       float dropout_p, std::uint64_t stream, const T* sink, const T* kv) {
  const int per_group = d.heads / d.groups, keys = d.keys();
  const int ld = int(std::int64_t(d.batch) * d.qkv_width());
  const int ldo = d.batch * d.heads * d.head_dim;
  const std::int64_t ss = std::int64_t(d.seq) * keys;
  if (!kv) kv = qkv;
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
        // Query rows at positions [g0, g1) only see keys [k0, g1): causal, and the window's start.
        for_each_block(d, [&](row_block_span s) {
          const int k0 = first_key(d, b, s.g0);
          gemm<T>(false, true, s.r1 - s.r0, s.g1() - k0, d.head_dim, scale,
                  qkv + at.q + std::int64_t(s.r0) * ld, ld, kv + at.k + std::int64_t(k0) * ld, ld,
                  T(0), p + std::int64_t(s.r0) * keys + k0, keys);
        });
        masked_softmax(p, d, b, sink ? sink + h : nullptr);
        const T* pv = p;
        if (dropout_p > 0) {
          apply_dropout(dropped.data(), p, d, dropout_p, stream, mask_base(d, b, h));
          pv = dropped.data();
        }
        for_each_block(d, [&](row_block_span s) {
          const int k0 = first_key(d, b, s.g0);
          gemm<T>(false, false, s.r1 - s.r0, d.head_dim, s.g1() - k0, T(1),
                  pv + std::int64_t(s.r0) * keys + k0, keys, kv + at.v + std::int64_t(k0) * ld, ld,
                  T(0), out + at.o + std::int64_t(s.r0) * ldo, ldo);
        });
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs,
                        const attention_dims& d, T scale, float dropout_p, std::uint64_t stream,
                        const T* sink, T* dsink, const T* kv, T* dkv) {
  const int per_group = d.heads / d.groups, keys = d.keys();
  const int ld = int(std::int64_t(d.batch) * d.qkv_width());
  const int ldo = d.batch * d.heads * d.head_dim;
  const std::int64_t ss = std::int64_t(d.seq) * keys;
  if (!kv) kv = qkv;
  if (!dkv) dkv = dqkv;
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
      for (int i = 0; i < keys; ++i)  // dK and dV of this group are accumulated below.
        std::fill_n(dkv + first.k + std::int64_t(i) * ld, 2 * d.head_dim, T(0));
      for (int j = 0; j < per_group; ++j) {
        const int h = g * per_group + j;
        const head_view at = locate(d, b, g, j);
        const T* p = probs + (std::int64_t(b) * d.heads + h) * ss;
        const T* pv = p;
        if (dropout_p > 0) {
          apply_dropout(dropped.data(), p, d, dropout_p, stream, mask_base(d, b, h));
          pv = dropped.data();
        }
        // dV += P'^T dO ; dP' = dO V^T, over the visible blocks only (the rest of dP' is left
        // unset and zeroed by softmax_backward).
        for_each_block(d, [&](row_block_span s) {
          const int k0 = first_key(d, b, s.g0);
          gemm<T>(true, false, s.g1() - k0, d.head_dim, s.r1 - s.r0, T(1),
                  pv + std::int64_t(s.r0) * keys + k0, keys, dout + at.o + std::int64_t(s.r0) * ldo,
                  ldo, T(1), dkv + at.v + std::int64_t(k0) * ld, ld);
          gemm<T>(false, true, s.r1 - s.r0, s.g1() - k0, d.head_dim, T(1),
                  dout + at.o + std::int64_t(s.r0) * ldo, ldo, kv + at.v + std::int64_t(k0) * ld, ld,
                  T(0), dp.data() + std::int64_t(s.r0) * keys + k0, keys);
        });
        if (dropout_p > 0)
          apply_dropout(dp.data(), dp.data(), d, dropout_p, stream, mask_base(d, b, h));
        const T ds = softmax_backward(dp.data(), p, d, b);
        if (!sink_grads.empty()) sink_grads[std::size_t(b) * d.heads + h] = ds;
        // dQ = scale * dS K ; dK += scale * dS^T Q
        for_each_block(d, [&](row_block_span s) {
          const int k0 = first_key(d, b, s.g0);
          const T* dsr = dp.data() + std::int64_t(s.r0) * keys + k0;
          gemm<T>(false, false, s.r1 - s.r0, d.head_dim, s.g1() - k0, scale, dsr, keys,
                  kv + at.k + std::int64_t(k0) * ld, ld, T(0), dqkv + at.q + std::int64_t(s.r0) * ld,
                  ld);
          gemm<T>(true, false, s.g1() - k0, d.head_dim, s.r1 - s.r0, scale, dsr, keys,
                  qkv + at.q + std::int64_t(s.r0) * ld, ld, T(1), dkv + at.k + std::int64_t(k0) * ld,
                  ld);
        });
      }
    }
  }
  if (sink_grads.empty()) return;
  for (int b = 0; b < d.batch; ++b)
    for (int h = 0; h < d.heads; ++h) dsink[h] += sink_grads[std::size_t(b) * d.heads + h];
}

template void attention_forward<float>(float*, float*, const float*, const attention_dims&, float,
                                       float, std::uint64_t, const float*, const float*);
template void attention_forward<double>(double*, double*, const double*, const attention_dims&,
                                        double, float, std::uint64_t, const double*, const double*);
template void attention_backward<float>(float*, const float*, const float*, const float*,
                                        const attention_dims&, float, float, std::uint64_t,
                                        const float*, float*, const float*, float*);
template void attention_backward<double>(double*, const double*, const double*, const double*,
                                         const attention_dims&, double, float, std::uint64_t,
                                         const double*, double*, const double*, double*);


namespace {
std::int64_t rows_of(const attention_dims& d) { return std::int64_t(d.seq) * d.batch; }
std::int64_t probs_of(const attention_dims& d) {
  return std::int64_t(d.batch) * d.heads * d.seq * d.keys();
}
std::int64_t kv_rows_of(const attention_dims& d) { return std::int64_t(d.keys()) * d.batch; }
}  // namespace

void attention_forward(tensor::tensor_view out, tensor::tensor_view probs,
                       tensor::const_tensor_view qkv, const attention_dims& dims, double scale,
                       float dropout_p, std::uint64_t dropout_stream,
                       tensor::const_tensor_view sink, tensor::const_tensor_view kv) {
  const char* k = "attention_forward";
  check_compatible(k, {out, probs, qkv, sink, kv});
  detail::need_optional(k, "sink", sink, dims.heads);
  detail::need_optional(k, "kv", kv, kv_rows_of(dims) * dims.qkv_width());
  detail::need(k, "out", out, rows_of(dims) * dims.heads * dims.head_dim);
  detail::need(k, "probs", probs, probs_of(dims));
  detail::need(k, "qkv", qkv, rows_of(dims) * dims.qkv_width());
  if (on_device(out))
    return device_kernels_for("attention_forward", out).attention_forward(out, probs, qkv, dims,
        scale, dropout_p, dropout_stream, sink, kv);
  detail::fp32_stage stage;
  dispatch_compute(k, out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    attention_forward<T>(stage.output<T>(out, rows_of(dims) * dims.heads * dims.head_dim),
                         stage.output<T>(probs, probs_of(dims)), stage.typed<T>(qkv),
                         dims, T(scale), dropout_p, dropout_stream, stage.typed<T>(sink),
                         stage.typed<T>(kv));
  });
}

void attention_backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                        tensor::const_tensor_view qkv, tensor::const_tensor_view probs,
                        const attention_dims& dims, double scale, float dropout_p,
                        std::uint64_t dropout_stream, tensor::const_tensor_view sink,
                        tensor::tensor_view dsink, tensor::const_tensor_view kv,
                        tensor::tensor_view dkv) {
  const char* k = "attention_backward";
  check_compatible(k, {dqkv, dout, qkv, probs, sink, dsink, kv, dkv});
  detail::need_optional(k, "sink", sink, dims.heads);
  detail::need_optional(k, "dsink", dsink, dims.heads);
  detail::need_optional(k, "kv", kv, kv_rows_of(dims) * dims.qkv_width());
  detail::need_optional(k, "dkv", dkv, kv_rows_of(dims) * dims.qkv_width());
  if ((kv.data == nullptr) != (dkv.data == nullptr))
    throw std::invalid_argument("attention_backward: kv and dkv go together (context parallelism)");
  detail::need(k, "dqkv", dqkv, rows_of(dims) * dims.qkv_width());
  detail::need(k, "dout", dout, rows_of(dims) * dims.heads * dims.head_dim);
  detail::need(k, "qkv", qkv, rows_of(dims) * dims.qkv_width());
  detail::need(k, "probs", probs, probs_of(dims));
  if (on_device(dqkv))
    return device_kernels_for("attention_backward", dqkv).attention_backward(dqkv, dout, qkv, probs,
        dims, scale, dropout_p, dropout_stream, sink, dsink, kv, dkv);
  detail::fp32_stage stage;
  dispatch_compute(k, dqkv.type, dqkv.where, [&](auto zero) {
    using T = decltype(zero);
    attention_backward<T>(stage.typed<T>(dqkv), stage.typed<T>(dout), stage.typed<T>(qkv),
                          stage.typed<T>(probs), dims, T(scale), dropout_p, dropout_stream,
                          stage.typed<T>(sink), stage.typed<T>(dsink), stage.typed<T>(kv),
                          stage.typed<T>(dkv));
  });
}

}  // namespace mactor::kernels
