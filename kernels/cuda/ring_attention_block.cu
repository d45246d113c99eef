// Ring attention's block step: online-softmax forward, and the recomputing backward in two
// kernels (queries' gradient per query row, keys' and values' per key row). See the header.
#include "kernels/cuda/ring_attention_block.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/dropout_hash.hpp"

namespace mactor::kernels::cuda {

namespace {

constexpr int threads = 128;       // also the keys (or query rows) of one pass
constexpr int max_per_thread = 8;  // head_dim up to threads * max_per_thread

// ring_block_dims as the kernels read it: plain fields, the strides worked out.
struct device_ring {
  int batch, heads, groups, head_dim, per_group, head_offset, total_heads, window, local_length, seq_length;
  query_run queries[2], keys[2];
  int num_queries, num_keys;
  long long width;  // qkv row width
  float scale, p, keep_scale;
  std::uint64_t stream;
};

device_ring on_device(const ring_block_dims& r, float scale, float p, std::uint64_t stream) {
  if (r.d.head_dim > threads * max_per_thread)
    throw std::invalid_argument("cuda ring attention: head_dim " + std::to_string(r.d.head_dim) + " is over " +
                                std::to_string(threads * max_per_thread));
  return {r.d.batch, r.d.heads, r.d.groups, r.d.head_dim, r.per_group(), r.d.head_offset, r.d.total_heads,
          r.d.window, r.local_length, r.seq_length, {r.queries[0], r.queries[1]}, {r.keys[0], r.keys[1]},
          r.num_queries, r.num_keys, r.qkv_width(), scale, p, 1.0f / (1.0f - p), stream};
}

// The global position of local position i in runs (-1 outside them).
__device__ int position_in(const query_run* runs, int n, int i) {
  for (int k = 0; k < n; ++k)
    if (i >= runs[k].local && i < runs[k].local + runs[k].length) return runs[k].global + i - runs[k].local;
  return -1;
}

__device__ bool sees(const device_ring& d, int qpos, int kpos) {
  return qpos >= 0 && kpos >= 0 && kpos <= qpos && (d.window < 0 || kpos >= qpos - d.window);
}

// qkv row `row`: head h's query; its group's key (value follows); block row: group g's key.
__device__ long long query_at(const device_ring& d, long long row, int h) {
  const int g = h / d.per_group;
  return row * d.width + ((long long)g * (d.per_group + 2) + h % d.per_group) * d.head_dim;
}
__device__ long long block_at(const device_ring& d, long long row, int g) {
  return (row * d.groups + g) * 2LL * d.head_dim;
}

// The keep factor of (batch row b, head h, qpos, kpos): 0 or 1 / (1 - p), as the CPU draws it.
__device__ float keep_of(const device_ring& d, int b, int h, int qpos, int kpos) {
  if (d.p <= 0.0f) return 1.0f;
  const unsigned long long seq = (unsigned long long)d.seq_length;
  const unsigned long long head = (unsigned long long)b * d.total_heads + d.head_offset + h;
  return dropout_uniform(d.stream, head * seq * seq + (unsigned long long)qpos * seq + kpos) >= d.p ? d.keep_scale
                                                                                                    : 0.0f;
}

// The query row and head of this thread block (blockIdx.x = row * heads + h): its batch row b,
// group g and global position.
struct query_row {
  long long rh, row;
  int h, b, g, qpos;
};
__device__ query_row this_query_row(const device_ring& d) {
  query_row q;
  q.rh = blockIdx.x, q.row = q.rh / d.heads;
  q.h = int(q.rh % d.heads), q.b = int(q.row % d.batch), q.g = q.h / d.per_group;
  q.qpos = position_in(d.queries, d.num_queries, int(q.row / d.batch));
  return q;
}

__device__ float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int c = 0; c < n; ++c) s = fmaf(a[c], b[c], s);
  return s;
}

// One block per (query row, head): blockIdx.x = row * heads + h. Shared: q[hd], w[threads].
__global__ void forward_kernel(float* m, float* l, float* o, const float* qkv, const float* block, device_ring d) {
  extern __shared__ float shared[];
  float* q = shared;
  float* w = shared + d.head_dim;
  const auto [rh, row, h, b, g, qpos] = this_query_row(d);
  const float* qsrc = qkv + query_at(d, row, h);
  for (int c = threadIdx.x; c < d.head_dim; c += blockDim.x) q[c] = qsrc[c];
  float acc[max_per_thread];
  for (int k = 0; k < max_per_thread; ++k) acc[k] = 0.0f;
  float mx = m[rh], sum = l[rh];
  for (int k = 0, c = threadIdx.x; c < d.head_dim; c += blockDim.x, ++k) acc[k] = o[rh * d.head_dim + c];
  __syncthreads();
  for (int j0 = 0; j0 < d.local_length; j0 += threads) {
    const int j = j0 + threadIdx.x;
    const int kpos = j < d.local_length ? position_in(d.keys, d.num_keys, j) : -1;
    const bool visible = j < d.local_length && sees(d, qpos, kpos);
    const float* key = block + block_at(d, (long long)j * d.batch + b, g);
    const float s = visible ? d.scale * dot(q, key, d.head_dim) : -FLT_MAX;
    const float chunk_max = detail::block_reduce(s, detail::max_op{});
    if (chunk_max == -FLT_MAX) continue;  // no key of this pass is visible (uniform over the block)
    const float next = fmaxf(mx, chunk_max), corr = expf(mx - next);
    const float e = visible ? expf(s - next) : 0.0f;
    sum = sum * corr + detail::block_reduce(e, detail::sum_op{});
    mx = next;
    w[threadIdx.x] = visible ? e * keep_of(d, b, h, qpos, kpos) : 0.0f;
    __syncthreads();
    const int n = min(threads, d.local_length - j0);
    for (int k = 0, c = threadIdx.x; c < d.head_dim; c += blockDim.x, ++k) {
      float v = acc[k] * corr;
      for (int t = 0; t < n; ++t)
        if (w[t] != 0.0f) v = fmaf(w[t], block[block_at(d, (long long)(j0 + t) * d.batch + b, g) + d.head_dim + c], v);
      acc[k] = v;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) m[rh] = mx, l[rh] = sum;
  for (int k = 0, c = threadIdx.x; c < d.head_dim; c += blockDim.x, ++k) o[rh * d.head_dim + c] = acc[k];
}

// One block per (query row, head): dq[rh] += sum over visible keys of dS K. Shared: q, dout
// [hd each], ds[threads].
__global__ void query_grad_kernel(float* dq, const float* dout, const float* qkv, const float* block, const float* lse,
                                  const float* delta, device_ring d) {
  extern __shared__ float shared[];
  float* q = shared;
  float* go = shared + d.head_dim;
  float* ds = go + d.head_dim;
  const auto [rh, row, h, b, g, qpos] = this_query_row(d);
  const float* qsrc = qkv + query_at(d, row, h);
  for (int c = threadIdx.x; c < d.head_dim; c += blockDim.x) q[c] = qsrc[c], go[c] = dout[rh * d.head_dim + c];
  float acc[max_per_thread];
  for (int k = 0; k < max_per_thread; ++k) acc[k] = 0.0f;
  const float row_lse = lse[rh], row_delta = delta[rh];
  __syncthreads();
  for (int j0 = 0; j0 < d.local_length; j0 += threads) {
    const int j = j0 + threadIdx.x;
    const int kpos = j < d.local_length ? position_in(d.keys, d.num_keys, j) : -1;
    float grad = 0.0f;
    if (j < d.local_length && sees(d, qpos, kpos)) {
      const float* key = block + block_at(d, (long long)j * d.batch + b, g);
      const float p = expf(d.scale * dot(q, key, d.head_dim) - row_lse);
      const float dp = dot(go, key + d.head_dim, d.head_dim);
      grad = p * (keep_of(d, b, h, qpos, kpos) * dp - row_delta) * d.scale;
    }
    ds[threadIdx.x] = grad;
    __syncthreads();
    const int n = min(threads, d.local_length - j0);
    for (int k = 0, c = threadIdx.x; c < d.head_dim; c += blockDim.x, ++k)
      for (int t = 0; t < n; ++t)
        if (ds[t] != 0.0f) acc[k] = fmaf(ds[t], block[block_at(d, (long long)(j0 + t) * d.batch + b, g) + c], acc[k]);
    __syncthreads();
  }
  for (int k = 0, c = threadIdx.x; c < d.head_dim; c += blockDim.x, ++k) dq[rh * d.head_dim + c] += acc[k];
}

// One block per (block row, group): blockIdx.x = key row * groups + g. dV += (P z)^T dO and
// dK += dS^T Q over the group's heads and the query rows that see the key. Shared: key, value
// [hd each], pz and ds [threads each].
__global__ void key_value_grad_kernel(float* dblock, const float* dout, const float* qkv, const float* block,
                                      const float* lse, const float* delta, device_ring d) {
  extern __shared__ float shared[];
  float* key = shared;
  float* value = key + d.head_dim;
  float* pz = value + d.head_dim;
  float* ds = pz + threads;
  const long long kr = blockIdx.x / d.groups;
  const int g = int(blockIdx.x % d.groups), b = int(kr % d.batch);
  const int kpos = position_in(d.keys, d.num_keys, int(kr / d.batch));
  const long long at = block_at(d, kr, g);
  for (int c = threadIdx.x; c < d.head_dim; c += blockDim.x) key[c] = block[at + c], value[c] = block[at + d.head_dim + c];
  float dk[max_per_thread], dv[max_per_thread];
  for (int k = 0; k < max_per_thread; ++k) dk[k] = dv[k] = 0.0f;
  __syncthreads();
  for (int h = g * d.per_group; h < (g + 1) * d.per_group; ++h)
    for (int i0 = 0; i0 < d.local_length; i0 += threads) {
      const int i = i0 + threadIdx.x;
      const int qpos = i < d.local_length ? position_in(d.queries, d.num_queries, i) : -1;
      const long long row = (long long)i * d.batch + b, rh = row * d.heads + h;
      float kept = 0.0f, grad = 0.0f;
      if (i < d.local_length && sees(d, qpos, kpos)) {
        const float p = expf(d.scale * dot(qkv + query_at(d, row, h), key, d.head_dim) - lse[rh]);
        const float z = keep_of(d, b, h, qpos, kpos);
        const float dp = dot(dout + rh * d.head_dim, value, d.head_dim);
        kept = p * z;
        grad = p * (z * dp - delta[rh]) * d.scale;
      }
      pz[threadIdx.x] = kept, ds[threadIdx.x] = grad;
      __syncthreads();
      const int n = min(threads, d.local_length - i0);
      for (int k = 0, c = threadIdx.x; c < d.head_dim; c += blockDim.x, ++k)
        for (int t = 0; t < n; ++t) {
          const long long trow = (long long)(i0 + t) * d.batch + b;
          if (pz[t] != 0.0f) dv[k] = fmaf(pz[t], dout[(trow * d.heads + h) * d.head_dim + c], dv[k]);
          if (ds[t] != 0.0f) dk[k] = fmaf(ds[t], qkv[query_at(d, trow, h) + c], dk[k]);
        }
      __syncthreads();
    }
  for (int k = 0, c = threadIdx.x; c < d.head_dim; c += blockDim.x, ++k)
    dblock[at + c] += dk[k], dblock[at + d.head_dim + c] += dv[k];
}

}  // namespace

void ring_block_forward(float* m, float* l, float* o, const float* qkv, const float* block, const ring_block_dims& r,
                        float scale, float dropout_p, std::uint64_t dropout_stream, stream_handle s) {
  const device_ring d = on_device(r, scale, dropout_p, dropout_stream);
  const long long blocks = r.rows() * r.d.heads;
  if (blocks == 0) return;
  forward_kernel<<<unsigned(blocks), threads, sizeof(float) * (d.head_dim + threads), s>>>(m, l, o, qkv, block, d);
  detail::check_launch("ring_block_forward");
}

void ring_block_backward(float* dq, float* dblock, const float* dout, const float* qkv, const float* block,
                         const float* lse, const float* delta, const ring_block_dims& r, float scale, float dropout_p,
                         std::uint64_t dropout_stream, stream_handle s) {
  const device_ring d = on_device(r, scale, dropout_p, dropout_stream);
  const long long query_blocks = r.rows() * r.d.heads, key_blocks = r.rows() * r.d.groups;
  if (query_blocks == 0) return;
  query_grad_kernel<<<unsigned(query_blocks), threads, sizeof(float) * (2 * d.head_dim + threads), s>>>(
      dq, dout, qkv, block, lse, delta, d);
  detail::check_launch("ring_block_backward (queries)");
  key_value_grad_kernel<<<unsigned(key_blocks), threads, sizeof(float) * (2 * d.head_dim + 2 * threads), s>>>(
      dblock, dout, qkv, block, lse, delta, d);
  detail::check_launch("ring_block_backward (keys and values)");
}

}  // namespace mactor::kernels::cuda
