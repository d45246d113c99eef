// Ring attention's tiles: per (query chunk, key chunk) pair and (batch row, head), GEMMs for the
// products and one pass over the tile for the mask and the softmax (see the header).
#include "model/ring_attention_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <omp.h>

#include "kernels/cpu/vector_math.hpp"  // one-rank attention's SIMD exp and dropout loop
#include "kernels/gemm.hpp"

namespace mactor::model::ring_blocks {

template <typename T>
void dropout_mask::factors(T* z, int b, int h, int qpos, int kpos, int n) const {
  const std::uint64_t head = std::uint64_t(b) * d.total_heads + d.head_offset + h;
  const std::uint64_t at = head * seq * seq + std::uint64_t(qpos) * seq + std::uint64_t(kpos);
  std::fill(z, z + n, T(1));  // 1 x (1 / (1 - p)) is the keep factor exactly
  kernels::detail::dropout_scale(z, z, n, p, stream, at);
}

namespace {

// One tile: this rank's query chunk q against key chunk k of a block. Column j is key position
// k.global + j; only the first `columns` keys can be seen by any of its queries.
struct tile {
  kernels::query_run q, k;
  int columns = 0;
  // The keys query row i sees, as columns [first, last] (empty when first > last).
  std::pair<int, int> visible(const kernels::attention_dims& d, int i) const {
    const int qpos = q.global + i;
    int first = k.global, last = std::min(k.global + k.length - 1, qpos);
    if (d.window >= 0) first = std::max(first, qpos - d.window);
    return {first - k.global, last - k.global};
  }
};

// The tiles of this rank's queries against `owner`'s block that hold a visible key.
std::vector<tile> tiles_of(const layout& L, int owner) {
  const sequence_shard keys_of{L.shard.seq_length, L.shard.cp_size, owner};
  std::vector<tile> out;
  for (const auto& q : L.shard.runs())
    for (const auto& k : keys_of.runs()) {
      const int columns = std::min(k.length, q.global + q.length - k.global);
      if (columns <= 0) continue;  // every key after every query
      if (L.d.window >= 0 && k.global + columns - 1 < q.global - L.d.window) continue;  // every key too old
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
operands operands_of(const layout& L, const tile& t, int b, int h) {
  const int batch = L.d.batch;
  return {L.q_at(std::int64_t(t.q.local) * batch + b, h),
          L.row_head(std::int64_t(t.q.local) * batch + b, h) * L.d.head_dim,
          L.block_at(std::int64_t(t.k.local) * batch + b, h / L.per_group()),
          int(batch * L.width()), batch * L.d.heads * L.d.head_dim, batch * L.d.groups * 2 * L.d.head_dim};
}

// Tiny problems (tests) stay on one thread: waking a team costs more than the work.
bool worth_threads(const layout& L) {
  const std::int64_t n = L.shard.local_length();
  return std::int64_t(L.d.batch) * L.d.heads * n * n * L.d.head_dim > (1 << 16) && L.d.batch * L.d.groups > 1;
}

// The max of row[0, n); row[j] = exp(row[j] - shift) in place, returning their sum. Floats go
// through vector_math's SIMD helpers, as one-rank attention's softmax does (libm's scalar expf
// made these tiles cost 3 times the one-rank kernel's share); doubles use std::exp.
float max_of(const float* row, int n) { return kernels::detail::row_max(row, n); }
double max_of(const double* row, int n) { return *std::max_element(row, row + n); }
float exp_shifted(float* row, int n, float shift) { return kernels::detail::exp_shifted_sum(row, n, shift); }
double exp_shifted(double* row, int n, double shift) {
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += row[j] = std::exp(row[j] - shift);
  return sum;
}

// After each tile: the caller's between-tiles work, on one thread of the team only.
void after_tile(const between_tiles& between) {
  if (between && omp_get_thread_num() == 0) between();
}

}  // namespace

template <typename T>
void forward_block(forward_state<T>& st, const T* qkv, const T* block, int owner, const layout& L, T scale,
                   const dropout_mask& drop, const between_tiles& between) {
  const int hd = L.d.head_dim, heads = L.d.heads, batch = L.d.batch;
  const auto tiles = tiles_of(L, owner);
  // Each (batch row, head) owns its rows of the state: split over them.
#pragma omp parallel if (worth_threads(L))
  {
    std::vector<T> s, z;
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < batch * heads; ++bh) {
      const int b = bh / heads, h = bh % heads;
      for (const tile& t : tiles) {
        const operands x = operands_of(L, t, b, h);
        const int rows = t.q.length, cols = t.columns;
        s.resize(std::size_t(rows) * cols);
        kernels::gemm<T>(false, true, rows, cols, hd, scale, qkv + x.q, x.ldq, block + x.key, x.ldk, T(0), s.data(), cols);
        for (int i = 0; i < rows; ++i) {
          T* row = s.data() + std::int64_t(i) * cols;
          const auto [first, last] = t.visible(L.d, i);
          if (first > last) {
            std::fill(row, row + cols, T(0));
            continue;
          }
          std::fill(row, row + first, T(0));
          std::fill(row + last + 1, row + cols, T(0));
          const std::int64_t rh = L.row_head(std::int64_t(t.q.local + i) * batch + b, h);
          const T m = std::max(st.m[rh], max_of(row + first, last - first + 1)), corr = std::exp(st.m[rh] - m);
          T* o = st.o.data() + rh * hd;
          for (int c = 0; c < hd; ++c) o[c] *= corr;
          st.l[rh] = st.l[rh] * corr + exp_shifted(row + first, last - first + 1, m);
          st.m[rh] = m;
          if (drop.p > 0) {
            const int n = last - first + 1;
            z.resize(std::size_t(n));
            drop.factors(z.data(), b, h, t.q.global + i, t.k.global + first, n);
            for (int j = 0; j < n; ++j) row[first + j] *= z[std::size_t(j)];
          }
        }
        // o += P V, with P the exponentials (dropped) and o rescaled above.
        kernels::gemm<T>(false, false, rows, hd, cols, T(1), s.data(), cols, block + x.key + hd, x.ldk, T(1),
                         st.o.data() + x.out, x.ldo);
        after_tile(between);
      }
    }
  }
}

template <typename T>
void backward_block(backward_rows<T>& rows, T* dblock, const T* dout, const T* qkv, const T* block, int owner,
                    const layout& L, T scale, const dropout_mask& drop, const between_tiles& between) {
  const int hd = L.d.head_dim, batch = L.d.batch, per_group = L.per_group();
  const auto tiles = tiles_of(L, owner);
  // A group's heads add into the same key and value gradients: split over (batch row, group).
#pragma omp parallel if (worth_threads(L))
  {
    std::vector<T> p, ds, z;
#pragma omp for schedule(dynamic)
    for (int bg = 0; bg < batch * L.d.groups; ++bg) {
      const int b = bg / L.d.groups;
      for (int h = bg % L.d.groups * per_group; h < (bg % L.d.groups + 1) * per_group; ++h)
        for (const tile& t : tiles) {
          const operands x = operands_of(L, t, b, h);
          const int n = t.q.length, cols = t.columns;
          const T *q = qkv + x.q, *key = block + x.key, *dor = dout + x.out;
          p.resize(std::size_t(n) * cols), ds.resize(p.size());
          kernels::gemm<T>(false, true, n, cols, hd, scale, q, x.ldq, key, x.ldk, T(0), p.data(), cols);
          kernels::gemm<T>(false, true, n, cols, hd, T(1), dor, x.ldo, key + hd, x.ldk, T(0), ds.data(), cols);
          for (int i = 0; i < n; ++i) {
            T *pr = p.data() + std::int64_t(i) * cols, *dr = ds.data() + std::int64_t(i) * cols;
            const auto [first, last] = t.visible(L.d, i);
            const std::int64_t rh = L.row_head(std::int64_t(t.q.local + i) * batch + b, h);
            const int lo = std::min(first, cols), hi = std::max(last + 1, lo);  // visible columns [lo, hi)
            std::fill(pr, pr + lo, T(0)), std::fill(dr, dr + lo, T(0));
            std::fill(pr + hi, pr + cols, T(0)), std::fill(dr + hi, dr + cols, T(0));
            if (hi == lo) continue;
            exp_shifted(pr + lo, hi - lo, rows.lse[rh]);  // the probabilities, recomputed
            const T delta = rows.delta[std::size_t(rh)];
            const bool dropped = drop.p > 0;  // else every keep factor is 1
            if (dropped) z.resize(std::size_t(hi - lo)), drop.factors(z.data(), b, h, t.q.global + i, t.k.global + lo, hi - lo);
            for (int j = lo; j < hi; ++j) {
              const T prob = pr[j], keep = dropped ? z[std::size_t(j - lo)] : T(1);
              pr[j] = prob * keep;                             // dV += (P z)^T dO
              dr[j] = prob * (keep * dr[j] - delta) * scale;   // dS
            }
          }
          T* dkey = dblock + x.key;
          kernels::gemm<T>(true, false, cols, hd, n, T(1), p.data(), cols, dor, x.ldo, T(1), dkey + hd, x.ldk);
          kernels::gemm<T>(false, false, n, hd, cols, T(1), ds.data(), cols, key, x.ldk, T(1), rows.dq.data() + x.out,
                           x.ldo);
          kernels::gemm<T>(true, false, cols, hd, n, T(1), ds.data(), cols, q, x.ldq, T(1), dkey, x.ldk);
          after_tile(between);
        }
    }
  }
}

template void forward_block<float>(forward_state<float>&, const float*, const float*, int, const layout&, float,
                                   const dropout_mask&, const between_tiles&);
template void forward_block<double>(forward_state<double>&, const double*, const double*, int, const layout&, double,
                                    const dropout_mask&, const between_tiles&);
template void backward_block<float>(backward_rows<float>&, float*, const float*, const float*, const float*, int,
                                    const layout&, float, const dropout_mask&, const between_tiles&);
template void backward_block<double>(backward_rows<double>&, double*, const double*, const double*, const double*, int,
                                     const layout&, double, const dropout_mask&, const between_tiles&);

}  // namespace mactor::model::ring_blocks
