// The attention core, one thread block per query row (forward and the queries' gradient) or per
// key row (the keys' and values' gradients, summed over the rows that see the key): no atomics, so
// a backward gives the same bits every time. Rows of probabilities and of their gradient live in
// global memory ([batch, heads, seq, keys], as the CPU kernel keeps them) and pass through shared
// memory in tiles for the products with V, K, Q and dO.
#include "kernels/cuda/attention.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/dropout_hash.hpp"

namespace mactor::kernels::cuda {

namespace {

constexpr int threads = 128;
constexpr int max_per_thread = 8;  // head_dim up to threads * max_per_thread
constexpr int tile = 1024;         // keys (or query rows) per shared-memory tile

// attention_dims as the kernels read it: plain fields, the row strides worked out.
struct device_dims {
  int seq, batch, heads, groups, head_dim, head_offset, total_heads, window, keys, per_group;
  const std::int32_t* document_start;
  query_run runs[2];
  int num_runs;
  long long ld;     // floats between the rows of qkv and kv: batch * qkv width
  long long ldo;    // floats between the rows of out: batch * heads * head_dim
  long long width;  // one batch row's qkv width
};

device_dims on_device(const attention_dims& a) {
  if (a.head_dim > threads * max_per_thread)
    throw std::invalid_argument("cuda attention: head_dim " + std::to_string(a.head_dim) + " is over " +
                                std::to_string(threads * max_per_thread));
  device_dims d{a.seq, a.batch, a.heads, a.groups, a.head_dim, a.head_offset, a.total_heads, a.window,
                a.keys(), a.heads / a.groups, a.document_start, {a.runs[0], a.runs[1]}, a.num_runs,
                a.batch * a.qkv_width(), (long long)a.batch * a.heads * a.head_dim, a.qkv_width()};
  return d;
}

// Row i's global position, or -1 for a row outside every run (never touched, as on the CPU).
__device__ int position_of(const device_dims& d, int i) {
  if (d.num_runs == 0) return i;
  for (int r = 0; r < d.num_runs; ++r)
    if (i >= d.runs[r].local && i < d.runs[r].local + d.runs[r].length) return d.runs[r].global + i - d.runs[r].local;
  return -1;
}

// The first key the query at position g of batch row b sees (window, document start).
__device__ int first_key(const device_dims& d, int b, int g) {
  int lo = d.window < 0 ? 0 : max(0, g - d.window);
  if (d.document_start) lo = max(lo, int(d.document_start[(long long)b * d.keys + g]));
  return lo;
}

// Offsets in a qkv (or kv) row of batch row b: head h's query, its group's key (value follows).
__device__ long long query_at(const device_dims& d, int b, int h) {
  const int group = h / d.per_group;
  return b * d.width + (long long)group * (d.per_group + 2) * d.head_dim + (long long)(h % d.per_group) * d.head_dim;
}
__device__ long long key_at(const device_dims& d, int b, int group) {
  return b * d.width + (long long)group * (d.per_group + 2) * d.head_dim + (long long)d.per_group * d.head_dim;
}

__device__ unsigned long long mask_base(const device_dims& d, int b, int h) {
  const auto keys = (unsigned long long)d.keys;
  return ((unsigned long long)b * d.total_heads + d.head_offset + h) * keys * keys;
}

// A probability after dropout (the CPU kernel's mask element and rounding).
__device__ float dropped(float v, float p, float keep_scale, std::uint64_t stream, unsigned long long index) {
  if (p <= 0.0f) return v;
  return dropout_uniform(stream, index) >= p ? __fmul_rn(v, keep_scale) : 0.0f;
}

// out[t] = factor * sum over keys j in [lo, g] of weight(j) * rows[j * ld + t], t < head_dim: the
// weights pass through shared memory (`staged`, `tile` floats) a tile at a time. Every thread of
// the block calls it.
template <class Weight>
__device__ void weighted_key_rows(float* out, float factor, const float* rows, long long ld, int lo, int g,
                                  int head_dim, float* staged, Weight weight) {
  float acc[max_per_thread] = {};
  for (int j0 = lo; j0 <= g; j0 += tile) {
    const int j1 = min(g + 1, j0 + tile);
    __syncthreads();
    for (int j = j0 + threadIdx.x; j < j1; j += blockDim.x) staged[j - j0] = weight(j);
    __syncthreads();
    for (int j = j0; j < j1; ++j) {
      const float w = staged[j - j0];
      const float* m = rows + j * ld;
      for (int r = 0; r < max_per_thread; ++r) {
        const int t = threadIdx.x + r * blockDim.x;
        if (t < head_dim) acc[r] += w * m[t];
      }
    }
  }
  for (int r = 0; r < max_per_thread; ++r) {
    const int t = threadIdx.x + r * blockDim.x;
    if (t < head_dim) out[t] = factor * acc[r];
  }
}

// A query-row block (i, b * heads + h): its row, batch row, head and position (-1: outside every
// run, nothing to do), with one head_dim row of `from` (at `at` in row i) loaded into shared memory.
struct query_row {
  int i, b, h, g;
};
__device__ query_row load_query_row(const device_dims& d, float* shared_row, const float* from, long long ld,
                                    long long at) {
  const query_row q{int(blockIdx.x), int(blockIdx.y) / d.heads, int(blockIdx.y) % d.heads, position_of(d, blockIdx.x)};
  if (q.g < 0) return q;
  for (int t = threadIdx.x; t < d.head_dim; t += blockDim.x) shared_row[t] = from[q.i * ld + at + t];
  __syncthreads();
  return q;
}

// Block (i, b * heads + h): the scores of row i, their masked softmax into probs, then
// out[i] = dropout(P[i]) V.
__global__ void forward_kernel(float* out, float* probs, const float* qkv, const float* kv, const float* sink,
                               device_dims d, float scale, float p, float keep_scale, std::uint64_t stream) {
  extern __shared__ float shared[];
  float* q = shared;
  const int bq = blockIdx.y / d.heads, hq = blockIdx.y % d.heads;
  const auto [i, b, h, g] = load_query_row(d, q, qkv, d.ld, query_at(d, bq, hq));
  if (g < 0) return;
  float* row = probs + (((long long)b * d.heads + h) * d.seq + i) * d.keys;
  const int lo = first_key(d, b, g);
  const long long k_at = key_at(d, b, h / d.per_group);
  float mx = -FLT_MAX;
  for (int j = lo + threadIdx.x; j <= g; j += blockDim.x) {
    const float* k = kv + j * d.ld + k_at;
    float s = 0.0f;
    for (int t = 0; t < d.head_dim; ++t) s += q[t] * k[t];
    row[j] = scale * s;
    mx = fmaxf(mx, row[j]);
  }
  mx = detail::block_reduce(mx, detail::max_op{});
  if (sink) mx = fmaxf(mx, sink[h]);
  float sum = 0.0f;
  for (int j = lo + threadIdx.x; j <= g; j += blockDim.x) sum += (row[j] = expf(row[j] - mx));
  sum = detail::block_reduce(sum, detail::sum_op{});
  if (sink) sum += expf(sink[h] - mx);
  const float inv = 1.0f / sum;
  __syncthreads();
  for (int j = threadIdx.x; j < d.keys; j += blockDim.x) row[j] = j >= lo && j <= g ? row[j] * inv : 0.0f;

  const unsigned long long base = mask_base(d, b, h) + (unsigned long long)g * d.keys;
  weighted_key_rows(out + i * d.ldo + ((long long)b * d.heads + h) * d.head_dim, 1.0f, kv + k_at + d.head_dim, d.ld,
                    lo, g, d.head_dim, shared + d.head_dim,
                    [&](int j) { return dropped(row[j], p, keep_scale, stream, base + j); });
}

// Block (i, b * heads + h): dP = dO V^T with dropout, dS = P (dP - rowsum(P dP)) into ds, the row's
// sink-logit gradient -(1 - rowsum(P)) rowsum(P dP) into sink_rows, then dQ[i] = scale dS K.
__global__ void query_grad_kernel(float* dqkv, float* ds, float* sink_rows, const float* dout, const float* qkv,
                                  const float* kv, const float* probs, device_dims d, float scale, float p,
                                  float keep_scale, std::uint64_t stream) {
  extern __shared__ float shared[];
  float* dout_row = shared;
  const long long bh_block = blockIdx.y;  // b * heads + h
  const auto [i, b, h, g] = load_query_row(d, dout_row, dout, d.ldo, bh_block * d.head_dim);
  if (g < 0) return;
  const long long bh = (long long)b * d.heads + h;
  const float* prow = probs + (bh * d.seq + i) * d.keys;
  float* dsrow = ds + (bh * d.seq + i) * d.keys;
  const int lo = first_key(d, b, g);
  const long long k_at = key_at(d, b, h / d.per_group);
  const unsigned long long base = mask_base(d, b, h) + (unsigned long long)g * d.keys;
  float dot = 0.0f, mass = 0.0f;
  for (int j = lo + threadIdx.x; j <= g; j += blockDim.x) {
    const float* v = kv + j * d.ld + k_at + d.head_dim;
    float dp = 0.0f;
    for (int t = 0; t < d.head_dim; ++t) dp += dout_row[t] * v[t];
    dp = dropped(dp, p, keep_scale, stream, base + j);
    dsrow[j] = dp;
    dot += prow[j] * dp, mass += prow[j];
  }
  dot = detail::block_reduce(dot, detail::sum_op{});
  mass = detail::block_reduce(mass, detail::sum_op{});
  for (int j = lo + threadIdx.x; j <= g; j += blockDim.x) dsrow[j] = prow[j] * (dsrow[j] - dot);
  __syncthreads();
  for (int j = threadIdx.x; j < d.keys; j += blockDim.x)
    if (j < lo || j > g) dsrow[j] = 0.0f;
  if (threadIdx.x == 0) sink_rows[bh * d.seq + i] = -(1.0f - mass) * dot;
  weighted_key_rows(dqkv + i * d.ld + query_at(d, b, h), scale, kv + k_at, d.ld, lo, g, d.head_dim,
                    shared + d.head_dim, [&](int j) { return dsrow[j]; });
}

// Block (k, b * groups + group): dK[k] = scale sum_{h, i} dS[h, i, k] Q_h[i] and
// dV[k] = sum_{h, i} dropout(P)[h, i, k] dO_h[i] over the group's heads and the rows that see key k.
__global__ void key_value_grad_kernel(float* dkv, const float* ds, const float* dout, const float* qkv,
                                      const float* probs, device_dims d, float scale, float p, float keep_scale,
                                      std::uint64_t stream) {
  extern __shared__ float shared[];
  float* tile_p = shared;
  float* tile_ds = shared + tile;
  const int k = blockIdx.x, b = blockIdx.y / d.groups, group = blockIdx.y % d.groups;
  float acc_k[max_per_thread] = {}, acc_v[max_per_thread] = {};
  for (int h = group * d.per_group; h < (group + 1) * d.per_group; ++h) {
    const long long bh = (long long)b * d.heads + h;
    const unsigned long long base = mask_base(d, b, h);
    for (int i0 = 0; i0 < d.seq; i0 += tile) {
      const int i1 = min(d.seq, i0 + tile);
      __syncthreads();
      for (int i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
        const int g = position_of(d, i);
        const bool sees = g >= 0 && k <= g && k >= first_key(d, b, g);
        const long long at = (bh * d.seq + i) * d.keys + k;
        tile_p[i - i0] = sees ? dropped(probs[at], p, keep_scale, stream, base + (unsigned long long)g * d.keys + k) : 0.0f;
        tile_ds[i - i0] = sees ? ds[at] : 0.0f;
      }
      __syncthreads();
      for (int i = i0; i < i1; ++i) {
        const float wp = tile_p[i - i0], wds = tile_ds[i - i0];
        if (wp == 0.0f && wds == 0.0f) continue;
        const float* q = qkv + i * d.ld + query_at(d, b, h);
        const float* o = dout + i * d.ldo + bh * d.head_dim;
        for (int r = 0; r < max_per_thread; ++r) {
          const int t = threadIdx.x + r * blockDim.x;
          if (t < d.head_dim) acc_k[r] += wds * q[t], acc_v[r] += wp * o[t];
        }
      }
    }
  }
  float* dk = dkv + k * d.ld + key_at(d, b, group);
  for (int r = 0; r < max_per_thread; ++r) {
    const int t = threadIdx.x + r * blockDim.x;
    if (t < d.head_dim) dk[t] = scale * acc_k[r], dk[d.head_dim + t] = acc_v[r];
  }
}

// dsink[h] += sum over the batch of the rows' sums, each in the CPU kernel's order (runs, rows).
__global__ void sink_grad_kernel(float* dsink, const float* sink_rows, device_dims d) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= d.heads) return;
  float total = dsink[h];
  for (int b = 0; b < d.batch; ++b) {
    const float* rows = sink_rows + ((long long)b * d.heads + h) * d.seq;
    float s = 0.0f;
    if (d.num_runs == 0) {
      for (int i = 0; i < d.seq; ++i) s += rows[i];
    } else {
      for (int r = 0; r < d.num_runs; ++r)
        for (int i = d.runs[r].local; i < d.runs[r].local + d.runs[r].length; ++i) s += rows[i];
    }
    total += s;
  }
  dsink[h] = total;
}

dim3 grid_of(int rows, long long units) {
  if (units > 65535) throw std::invalid_argument("cuda attention: batch * heads " + std::to_string(units) + " is over 65535");
  return dim3(unsigned(rows), unsigned(units));
}

}  // namespace

void attention_forward(float* out, float* probs, const float* qkv, const attention_dims& dims, float scale,
                       float dropout_p, std::uint64_t dropout_stream, const float* sink, const float* kv,
                       stream_handle s) {
  const device_dims d = on_device(dims);
  if (d.seq == 0 || d.batch == 0 || d.heads == 0) return;
  const std::size_t shared = sizeof(float) * (d.head_dim + tile);
  forward_kernel<<<grid_of(d.seq, (long long)d.batch * d.heads), threads, shared, s>>>(
      out, probs, qkv, kv ? kv : qkv, sink, d, scale, dropout_p, 1.0f / (1.0f - dropout_p), dropout_stream);
  detail::check_launch("attention_forward");
}

std::int64_t attention_backward_scratch(const attention_dims& dims) {
  const std::int64_t rows = std::int64_t(dims.batch) * dims.heads * dims.seq;
  return rows * dims.keys() + rows;
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const attention_dims& dims, float scale, float dropout_p, std::uint64_t dropout_stream,
                        float* scratch, const float* sink, float* dsink, const float* kv, float* dkv,
                        stream_handle s) {
  const device_dims d = on_device(dims);
  if (d.seq == 0 || d.batch == 0 || d.heads == 0) return;
  float* ds = scratch;
  float* sink_rows = scratch + (long long)d.batch * d.heads * d.seq * d.keys;
  const float keep_scale = 1.0f / (1.0f - dropout_p);
  if (!kv) kv = qkv;
  if (!dkv) dkv = dqkv;
  query_grad_kernel<<<grid_of(d.seq, (long long)d.batch * d.heads), threads, sizeof(float) * (d.head_dim + tile), s>>>(
      dqkv, ds, sink_rows, dout, qkv, kv, probs, d, scale, dropout_p, keep_scale, dropout_stream);
  detail::check_launch("attention_backward (queries)");
  key_value_grad_kernel<<<grid_of(d.keys, (long long)d.batch * d.groups), threads, sizeof(float) * 2 * tile, s>>>(
      dkv, ds, dout, qkv, probs, d, scale, dropout_p, keep_scale, dropout_stream);
  detail::check_launch("attention_backward (keys and values)");
  if (sink && dsink) {
    sink_grad_kernel<<<detail::blocks_for(d.heads, threads), threads, 0, s>>>(dsink, sink_rows, d);
    detail::check_launch("attention_backward (sink)");
  }
}

}  // namespace mactor::kernels::cuda
