// What the SSD scan's forward and backward share: where one (batch, head, chunk) block lies in
// the [b, l, h, p] / [b, l, g, n] tensors, the chunk's step sizes and cumulative log-decay, and the
// causal decay mask of the intra-chunk quadratic form.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/ssd_scan.hpp"

namespace mactor::kernels::detail {

template <typename T>
T softplus(T u) {
  return u > T(20) ? u : std::log1p(std::exp(u));  // mamba_ssm's threshold
}

template <typename T>
T sigmoid(T u) {
  return T(1) / (T(1) + std::exp(-u));
}

/// exp(x) of a (negative) log-decay, flushed to zero far below one: exp(-60) ~ 1e-26 is nothing
/// next to the terms it would scale, while the subnormal floats it would otherwise grow into make
/// the GEMMs that read them tens of times slower (measured 2 against 25 GFLOP/s).
template <typename T>
T decay_exp(T x) {
  constexpr T cutoff = sizeof(T) == 4 ? T(-60) : T(-600);
  return x < cutoff ? T(0) : std::exp(x);
}

/// Offsets of one chunk of one head: rows t0 .. t0+q of batch b.
struct ssd_block {
  const ssd_shape& s;
  int b, hd, g, c, t0, q;
  ssd_block(const ssd_shape& shape, int batch, int head, int chunk)
      : s(shape), b(batch), hd(head), g(head / (shape.heads / shape.groups)), c(chunk),
        t0(chunk * shape.chunk), q(std::min(shape.chunk, shape.seq - chunk * shape.chunk)) {}
  std::int64_t row() const { return std::int64_t(b) * s.seq + t0; }
  std::int64_t x_at() const { return (row() * s.heads + hd) * s.head_dim; }       // ld h*p
  std::int64_t dt_at() const { return row() * s.heads + hd; }                      // stride h
  std::int64_t bc_at() const { return (row() * s.groups + g) * s.state; }         // ld g*n
  std::int64_t state_at(int chunk) const {
    return ((std::int64_t(b) * s.heads + hd) * s.num_chunks() + chunk) * s.head_dim * s.state;
  }
  /// The backward's per-head dB and dC scratch, [b, l, h, n] (summed over a group's heads after).
  std::int64_t per_head_at() const { return (row() * s.heads + hd) * s.state; }     // ld h*n
  std::int64_t gram_at() const {  // C B^T of this chunk's group in gram_matrices' buffer
    return ((std::int64_t(b) * s.groups + g) * s.num_chunks() + c) * s.chunk * s.chunk;
  }
  int ldx() const { return s.heads * s.head_dim; }
  int ldbc() const { return s.groups * s.state; }
  int ldph() const { return s.heads * s.state; }
};

/// G = C B^T ([q, q], ld q) for every (batch, group, chunk): [b, g, chunks, chunk, chunk]. The
/// group's heads share it, so it is formed once, before the per-head work runs in parallel.
template <typename T>
std::vector<T> gram_matrices(const T* B, const T* C, const ssd_shape& s);

/// dt[i] = softplus(dt_raw + dt_bias), cum[i] = A * (dt[0] + ... + dt[i]) over the chunk.
template <typename T>
void chunk_decay(T* dt, T* cum, const T* dt_raw, T bias, T A, const ssd_block& k) {
  T acc = 0;
  for (int i = 0; i < k.q; ++i) {
    dt[i] = softplus(dt_raw[k.dt_at() + std::int64_t(i) * k.s.heads] + bias);
    acc += dt[i] * A;
    cum[i] = acc;
  }
}

/// L[i, j] = exp(cum_i - cum_j) and M[i, j] = G[i, j] L[i, j] dt_j for j <= i, both 0 above the
/// diagonal ([q, q], ld q).
template <typename T>
void decay_mask(T* M, T* L, const T* G, const T* dt, const T* cum, int q) {
  for (int i = 0; i < q; ++i) {
    for (int j = 0; j <= i; ++j) {
      L[i * q + j] = decay_exp(cum[i] - cum[j]);
      M[i * q + j] = G[i * q + j] * L[i * q + j] * dt[j];
    }
    for (int j = i + 1; j < q; ++j) M[i * q + j] = L[i * q + j] = T(0);
  }
}

}  // namespace mactor::kernels::detail
