// Ring attention's tiles on the CPU: per (query chunk, key chunk) pair and (batch row, head),
// GEMMs for the products and one pass over the tile for the mask and the softmax (see the
// header), and the tensor entry points that check the views and hand device ones over.
#include "kernels/ring_attention_block.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <omp.h>

#include "kernels/cpu/typed.hpp"
#include "kernels/cpu/vector_math.hpp"  // one-rank attention's SIMD exp and dropout loop
#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/gemm.hpp"

namespace mactor::kernels {

namespace {

// Attention dropout's keep-and-rescale factors: z[j] = factor(b, h, qpos, kpos + j) for j in
// [0, n), the elements kernels::attention_forward draws on one rank; one tight loop over
// consecutive mask elements (a per-element call costs the tiles more than their GEMMs at short
// chunks).
template <typename T>
void dropout_factors(T* z, const ring_block_dims& r, float p, std::uint64_t stream, int b, int h, int qpos, int kpos,
                     int n) {
  const std::uint64_t seq = std::uint64_t(r.seq_length);
  const std::uint64_t head = std::uint64_t(b) * r.d.total_heads + r.d.head_offset + h;
  const std::uint64_t at = head * seq * seq + std::uint64_t(qpos) * seq + std::uint64_t(kpos);
  std::fill(z, z + n, T(1));  // 1 x (1 / (1 - p)) is the keep factor exactly
  detail::dropout_scale(z, z, n, p, stream, at);
}

// One tile: this rank's query chunk q against key chunk k of a block. Column j is key position
// k.global + j; only the first `columns` keys can be seen by any of its queries.
struct tile {
  query_run q, k;
  int columns = 0;
  // The keys query row i sees, as columns [first, last] (empty when first > last).
  std::pair<int, int> visible(const attention_dims& d, int i) const {
    const int qpos = q.global + i;
    int first = k.global, last = std::min(k.global + k.length - 1, qpos);
    if (d.window >= 0) first = std::max(first, qpos - d.window);
    return {first - k.global, last - k.global};
  }
};

// The tiles of this rank's queries against the block that hold a visible key.
std::vector<tile> tiles_of(const ring_block_dims& r) {
  std::vector<tile> out;
  for (int a = 0; a < r.num_queries; ++a)
    for (int c = 0; c < r.num_keys; ++c) {
      const query_run q = r.queries[std::size_t(a)], k = r.keys[std::size_t(c)];
      const int columns = std::min(k.length, q.global + q.length - k.global);
      if (columns <= 0) continue;  // every key after every query
      if (r.d.window >= 0 && k.global + columns - 1 < q.global - r.d.window) continue;  // every key too old
      out.push_back({q, k, columns});
    }
  return out;
}

// Strides and the first elements of one (tile, batch row, head): Q and dQ/dO rows of this
// rank, K and V rows of the block (dK and dV at the same offsets of the block's gradients).
struct operands {
  std::int64_t q, out, key;  // offsets into qkv, into [rows, heads, hd] arrays, into the block
  int ldq, ldo, ldk;
};
operands operands_of(const ring_block_dims& r, const tile& t, int b, int h) {
  const int batch = r.d.batch;
  return {r.q_at(std::int64_t(t.q.local) * batch + b, h),
          r.row_head(std::int64_t(t.q.local) * batch + b, h) * r.d.head_dim,
          r.block_at(std::int64_t(t.k.local) * batch + b, h / r.per_group()),
          int(batch * r.qkv_width()), batch * r.d.heads * r.d.head_dim, batch * r.d.groups * 2 * r.d.head_dim};
}

// Tiny problems (tests) stay on one thread: waking a team costs more than the work.
bool worth_threads(const ring_block_dims& r) {
  const std::int64_t n = r.local_length;
  return std::int64_t(r.d.batch) * r.d.heads * n * n * r.d.head_dim > (1 << 16) && r.d.batch * r.d.groups > 1;
}

// The max of row[0, n); row[j] = exp(row[j] - shift) in place, returning their sum. Floats go
// through vector_math's SIMD helpers, as one-rank attention's softmax does (libm's scalar expf
// made these tiles cost 3 times the one-rank kernel's share); doubles use std::exp.
float max_of(const float* row, int n) { return detail::row_max(row, n); }
double max_of(const double* row, int n) { return *std::max_element(row, row + n); }
float exp_shifted(float* row, int n, float shift) { return detail::exp_shifted_sum(row, n, shift); }
double exp_shifted(double* row, int n, double shift) {
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += row[j] = std::exp(row[j] - shift);
  return sum;
}

// After each tile: the caller's between-tiles work, on one thread of the team only.
void after_tile(const between_tiles& between) {
  if (between && omp_get_thread_num() == 0) between();
}

template <typename T>
void forward_block(T* m, T* l, T* o_all, const T* qkv, const T* block, const ring_block_dims& r, T scale, float p,
                   std::uint64_t stream, const between_tiles& between) {
  const int hd = r.d.head_dim, heads = r.d.heads, batch = r.d.batch;
  const auto tiles = tiles_of(r);
  // Each (batch row, head) owns its rows of the state: split over them.
#pragma omp parallel if (worth_threads(r))
  {
    std::vector<T> s, z;
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < batch * heads; ++bh) {
      const int b = bh / heads, h = bh % heads;
      for (const tile& t : tiles) {
        const operands x = operands_of(r, t, b, h);
        const int rows = t.q.length, cols = t.columns;
        s.resize(std::size_t(rows) * cols);
        gemm<T>(false, true, rows, cols, hd, scale, qkv + x.q, x.ldq, block + x.key, x.ldk, T(0), s.data(), cols);
        for (int i = 0; i < rows; ++i) {
          T* row = s.data() + std::int64_t(i) * cols;
          const auto [first, last] = t.visible(r.d, i);
          if (first > last) {
            std::fill(row, row + cols, T(0));
            continue;
          }
          std::fill(row, row + first, T(0));
          std::fill(row + last + 1, row + cols, T(0));
          const std::int64_t rh = r.row_head(std::int64_t(t.q.local + i) * batch + b, h);
          const T mx = std::max(m[rh], max_of(row + first, last - first + 1)), corr = std::exp(m[rh] - mx);
          T* o = o_all + rh * hd;
          for (int c = 0; c < hd; ++c) o[c] *= corr;
          l[rh] = l[rh] * corr + exp_shifted(row + first, last - first + 1, mx);
          m[rh] = mx;
          if (p > 0) {
            const int n = last - first + 1;
            z.resize(std::size_t(n));
            dropout_factors(z.data(), r, p, stream, b, h, t.q.global + i, t.k.global + first, n);
            for (int j = 0; j < n; ++j) row[first + j] *= z[std::size_t(j)];
          }
        }
        // o += P V, with P the exponentials (dropped) and o rescaled above.
        gemm<T>(false, false, rows, hd, cols, T(1), s.data(), cols, block + x.key + hd, x.ldk, T(1), o_all + x.out,
                x.ldo);
        after_tile(between);
      }
    }
  }
}

template <typename T>
void backward_block(T* dq, T* dblock, const T* dout, const T* qkv, const T* block, const T* lse, const T* delta,
                    const ring_block_dims& r, T scale, float dropout_p, std::uint64_t stream,
                    const between_tiles& between) {
  const int hd = r.d.head_dim, batch = r.d.batch, per_group = r.per_group();
  const auto tiles = tiles_of(r);
  // A group's heads add into the same key and value gradients: split over (batch row, group).
#pragma omp parallel if (worth_threads(r))
  {
    std::vector<T> p, ds, z;
#pragma omp for schedule(dynamic)
    for (int bg = 0; bg < batch * r.d.groups; ++bg) {
      const int b = bg / r.d.groups;
      for (int h = bg % r.d.groups * per_group; h < (bg % r.d.groups + 1) * per_group; ++h)
        for (const tile& t : tiles) {
          const operands x = operands_of(r, t, b, h);
          const int n = t.q.length, cols = t.columns;
          const T *q = qkv + x.q, *key = block + x.key, *dor = dout + x.out;
          p.resize(std::size_t(n) * cols), ds.resize(p.size());
          gemm<T>(false, true, n, cols, hd, scale, q, x.ldq, key, x.ldk, T(0), p.data(), cols);
          gemm<T>(false, true, n, cols, hd, T(1), dor, x.ldo, key + hd, x.ldk, T(0), ds.data(), cols);
          for (int i = 0; i < n; ++i) {
            T *pr = p.data() + std::int64_t(i) * cols, *dr = ds.data() + std::int64_t(i) * cols;
            const auto [first, last] = t.visible(r.d, i);
            const std::int64_t rh = r.row_head(std::int64_t(t.q.local + i) * batch + b, h);
            const int lo = std::min(first, cols), hi = std::max(last + 1, lo);  // visible columns [lo, hi)
            std::fill(pr, pr + lo, T(0)), std::fill(dr, dr + lo, T(0));
            std::fill(pr + hi, pr + cols, T(0)), std::fill(dr + hi, dr + cols, T(0));
            if (hi == lo) continue;
            exp_shifted(pr + lo, hi - lo, lse[rh]);  // the probabilities, recomputed
            const T row_delta = delta[rh];
            const bool dropped = dropout_p > 0;  // else every keep factor is 1
            if (dropped)
              z.resize(std::size_t(hi - lo)),
                  dropout_factors(z.data(), r, dropout_p, stream, b, h, t.q.global + i, t.k.global + lo, hi - lo);
            for (int j = lo; j < hi; ++j) {
              const T prob = pr[j], keep = dropped ? z[std::size_t(j - lo)] : T(1);
              pr[j] = prob * keep;                              // dV += (P z)^T dO
              dr[j] = prob * (keep * dr[j] - row_delta) * scale;  // dS
            }
          }
          T* dkey = dblock + x.key;
          gemm<T>(true, false, cols, hd, n, T(1), p.data(), cols, dor, x.ldo, T(1), dkey + hd, x.ldk);
          gemm<T>(false, false, n, hd, cols, T(1), ds.data(), cols, key, x.ldk, T(1), dq + x.out, x.ldo);
          gemm<T>(true, false, cols, hd, n, T(1), ds.data(), cols, q, x.ldq, T(1), dkey, x.ldk);
          after_tile(between);
        }
    }
  }
}

// The compute-type arguments must be exactly of qkv's compute type (no staging: they carry
// state across blocks), the others of a dtype that computes in it.
void need_compute_type(const char* kernel, tensor::dtype model, std::initializer_list<tensor::const_tensor_view> state) {
  for (const auto& v : state)
    if (v.type != compute_dtype(model))
      throw tensor::tensor_error(std::string("kernel ") + kernel + ": a " + std::string(tensor::short_name(v.type)) +
                                 " state for a " + std::string(tensor::short_name(model)) + " model (want " +
                                 std::string(tensor::short_name(compute_dtype(model))) + ")");
}

void check_ring_dims(const char* kernel, const ring_block_dims& r) {
  if (r.d.groups <= 0 || r.d.heads % r.d.groups != 0 || r.local_length <= 0 || r.seq_length < r.local_length ||
      r.num_queries < 1 || r.num_queries > 2 || r.num_keys < 1 || r.num_keys > 2)
    throw std::invalid_argument(std::string("kernel ") + kernel + ": malformed ring block dims (heads " +
                                std::to_string(r.d.heads) + ", groups " + std::to_string(r.d.groups) +
                                ", local length " + std::to_string(r.local_length) + ")");
}

}  // namespace

void ring_block_forward(tensor::tensor_view m, tensor::tensor_view l, tensor::tensor_view o,
                        tensor::const_tensor_view qkv, tensor::const_tensor_view block, const ring_block_dims& r,
                        double scale, float dropout_p, std::uint64_t dropout_stream, const between_tiles& between) {
  const char* k = "ring_block_forward";
  check_ring_dims(k, r);
  check_compatible(k, {m, l, o, qkv, block});
  need_compute_type(k, qkv.type, {m, l, o});
  const std::int64_t row_heads = r.rows() * r.d.heads;
  detail::need(k, "m", m, row_heads);
  detail::need(k, "l", l, row_heads);
  detail::need(k, "o", o, row_heads * r.d.head_dim);
  detail::need(k, "qkv", qkv, r.rows() * r.qkv_width());
  detail::need(k, "block", block, r.block_numel());
  if (on_device(m))
    return device_kernels_for(k, m).ring_block_forward(m, l, o, qkv, block, r, scale, dropout_p, dropout_stream);
  detail::fp32_stage stage;
  dispatch_compute(k, qkv.type, qkv.where, [&](auto zero) {
    using T = decltype(zero);
    forward_block<T>(m.host<T>().data(), l.host<T>().data(), o.host<T>().data(), stage.typed<T>(qkv),
                     stage.typed<T>(block), r, T(scale), dropout_p, dropout_stream, between);
  });
}

void ring_block_backward(tensor::tensor_view dq, tensor::tensor_view dblock, tensor::const_tensor_view dout,
                         tensor::const_tensor_view qkv, tensor::const_tensor_view block,
                         tensor::const_tensor_view lse, tensor::const_tensor_view delta, const ring_block_dims& r,
                         double scale, float dropout_p, std::uint64_t dropout_stream, const between_tiles& between) {
  const char* k = "ring_block_backward";
  check_ring_dims(k, r);
  check_compatible(k, {dq, dblock, dout, qkv, block, lse, delta});
  need_compute_type(k, qkv.type, {dq, dblock, lse, delta});
  const std::int64_t row_heads = r.rows() * r.d.heads;
  detail::need(k, "dq", dq, row_heads * r.d.head_dim);
  detail::need(k, "dblock", dblock, r.block_numel());
  detail::need(k, "dout", dout, row_heads * r.d.head_dim);
  detail::need(k, "qkv", qkv, r.rows() * r.qkv_width());
  detail::need(k, "block", block, r.block_numel());
  detail::need(k, "lse", lse, row_heads);
  detail::need(k, "delta", delta, row_heads);
  if (on_device(dq))
    return device_kernels_for(k, dq).ring_block_backward(dq, dblock, dout, qkv, block, lse, delta, r, scale,
                                                         dropout_p, dropout_stream);
  detail::fp32_stage stage;
  dispatch_compute(k, qkv.type, qkv.where, [&](auto zero) {
    using T = decltype(zero);
    backward_block<T>(dq.host<T>().data(), dblock.host<T>().data(), stage.typed<T>(dout), stage.typed<T>(qkv),
                      stage.typed<T>(block), lse.host<T>().data(), delta.host<T>().data(), r, T(scale),
                      dropout_p, dropout_stream, between);
  });
}

}  // namespace mactor::kernels
