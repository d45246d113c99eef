// The Mamba mixer's copies, conv1d and gated RMSNorm on the device (see the header).
#include "kernels/cuda/mamba.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/sigmoid.cuh"

namespace mactor::kernels::cuda {

namespace {

__device__ long long row_of(bool batch_seq, int t, int b, int seq, int batch) {
  return batch_seq ? (long long)b * seq + t : (long long)t * batch + b;
}

// Element e of the block: row r (in [seq, batch] order), column j.
template <class E>
__global__ void copy_columns_kernel(E* dst, column_side to, const E* src, column_side from, int columns, int seq,
                                    int batch) {
  const long long count = (long long)seq * batch * columns;
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) {
    const long long r = e / columns;
    const int j = int(e % columns), t = int(r / batch), b = int(r % batch);
    dst[row_of(to.batch_seq, t, b, seq, batch) * to.width + to.first_column + j] =
        src[row_of(from.batch_seq, t, b, seq, batch) * from.width + from.first_column + j];
  }
}

using detail::sigmoid;

// The pre-activation of (b, t, c): bias + sum over the window, in the CPU's order.
__device__ float conv_pre(const float* x, const float* w, const float* bias, int b, int t, int c, int seq,
                          int channels, int width) {
  float pre = bias ? bias[c] : 0.0f;
  for (int k = 0; k < width; ++k) {
    const int src = t - (width - 1) + k;
    if (src >= 0) pre = fmaf(w[(long long)c * width + k], x[((long long)b * seq + src) * channels + c], pre);
  }
  return pre;
}

__global__ void conv_forward_kernel(float* y, const float* x, const float* w, const float* bias, int batch, int seq,
                                    int channels, int width, bool silu) {
  const long long count = (long long)batch * seq * channels;
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) {
    const int c = int(e % channels);
    const long long r = e / channels;
    const float pre = conv_pre(x, w, bias, int(r / seq), int(r % seq), c, seq, channels, width);
    y[e] = silu ? pre * sigmoid(pre) : pre;
  }
}

// d(pre-activation) of every element: dy times silu'(pre) (or dy itself without SiLU).
__global__ void conv_dpre_kernel(float* dpre, const float* dy, const float* x, const float* w, const float* bias,
                                 int batch, int seq, int channels, int width, bool silu) {
  const long long count = (long long)batch * seq * channels;
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) {
    if (!silu) {
      dpre[e] = dy[e];
      continue;
    }
    const int c = int(e % channels);
    const long long r = e / channels;
    const float pre = conv_pre(x, w, bias, int(r / seq), int(r % seq), c, seq, channels, width);
    const float s = sigmoid(pre);
    dpre[e] = dy[e] * s * (1.0f + pre * (1.0f - s));
  }
}

// dx[b, t, c] = sum over k of w[c, k] dpre[b, t + width - 1 - k, c].
__global__ void conv_dx_kernel(float* dx, const float* dpre, const float* w, int batch, int seq, int channels,
                               int width) {
  const long long count = (long long)batch * seq * channels;
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) {
    const int c = int(e % channels);
    const long long r = e / channels;
    const int b = int(r / seq), t = int(r % seq);
    float sum = 0.0f;
    for (int k = 0; k < width; ++k) {
      const int out = t + (width - 1) - k;
      if (out < seq) sum = fmaf(w[(long long)c * width + k], dpre[((long long)b * seq + out) * channels + c], sum);
    }
    dx[e] = sum;
  }
}

// One block per channel: dw[c, k] += sum over rows of dpre[b, t + width - 1 - k, c] x[b, t, c], and
// dbias[c] += sum of dpre[., ., c].
__global__ void conv_weight_kernel(float* dw, float* dbias, const float* dpre, const float* x, int batch, int seq,
                                   int channels, int width) {
  const int c = blockIdx.x;
  const long long rows = (long long)batch * seq;
  for (int k = 0; k <= width; ++k) {  // k == width: the bias
    float sum = 0.0f;
    for (long long r = threadIdx.x; r < rows; r += blockDim.x) {
      const int b = int(r / seq), t = int(r % seq);
      if (k == width) {
        sum += dpre[r * channels + c];
        continue;
      }
      const int out = t + (width - 1) - k;
      if (out < seq) sum = fmaf(dpre[((long long)b * seq + out) * channels + c], x[r * channels + c], sum);
    }
    sum = detail::block_reduce(sum, detail::sum_op{});
    if (threadIdx.x == 0) {
      if (k < width && dw) dw[(long long)c * width + k] += sum;
      if (k == width && dbias) dbias[c] += sum;
    }
  }
}

// One block per (row i, group g): the gated values, their rstd and the normed output.
__global__ void gated_forward_kernel(float* y, float* rstd, const float* x, const float* z, const float* weight, int d,
                                     int group_size, float eps) {
  const int groups = d / group_size;
  const long long i = blockIdx.x / groups;
  const int g = int(blockIdx.x % groups), j0 = g * group_size;
  const long long row = i * d;
  float sq = 0.0f;
  for (int j = j0 + threadIdx.x; j < j0 + group_size; j += blockDim.x) {
    const float gated = x[row + j] * z[row + j] * sigmoid(z[row + j]);
    y[row + j] = gated;
    sq = fmaf(gated, gated, sq);
  }
  sq = detail::block_reduce(sq, detail::sum_op{});
  const float r = 1.0f / sqrtf(sq / float(group_size) + eps);
  if (threadIdx.x == 0) rstd[i * groups + g] = r;
  for (int j = j0 + threadIdx.x; j < j0 + group_size; j += blockDim.x) y[row + j] *= r * weight[j];
}

__global__ void gated_backward_kernel(float* dx, float* dz, const float* dy, const float* x, const float* z,
                                      const float* weight, const float* rstd, int d, int group_size) {
  const int groups = d / group_size;
  const long long i = blockIdx.x / groups;
  const int g = int(blockIdx.x % groups), j0 = g * group_size;
  const long long row = i * d;
  const float r = rstd[i * groups + g];
  float sum = 0.0f;  // sum_j dy_j w_j ghat_j
  for (int j = j0 + threadIdx.x; j < j0 + group_size; j += blockDim.x)
    sum += dy[row + j] * weight[j] * (x[row + j] * z[row + j] * sigmoid(z[row + j]) * r);
  const float mean = detail::block_reduce(sum, detail::sum_op{}) / float(group_size);
  for (int j = j0 + threadIdx.x; j < j0 + group_size; j += blockDim.x) {
    const float s = sigmoid(z[row + j]), silu = z[row + j] * s;
    const float ghat = x[row + j] * silu * r;
    const float dg = r * (dy[row + j] * weight[j] - ghat * mean);
    dx[row + j] = dg * silu;
    dz[row + j] = dg * x[row + j] * s * (1.0f + z[row + j] * (1.0f - s));
  }
}

// One thread per column j: dweight[j] += sum over rows of dy ghat, rows in order.
__global__ void gated_weight_kernel(float* dweight, const float* dy, const float* x, const float* z, const float* rstd,
                                    int n, int d, int group_size) {
  const int groups = d / group_size;
  for (long long j = detail::first_element(); j < d; j += detail::grid_stride()) {
    float sum = 0.0f;
    for (long long i = 0; i < n; ++i) {
      const long long e = i * d + j;
      sum = fmaf(dy[e], x[e] * z[e] * sigmoid(z[e]) * rstd[i * groups + j / group_size], sum);
    }
    dweight[j] += sum;
  }
}

constexpr int threads = 256;

}  // namespace

void copy_columns(void* dst, column_side to, const void* src, column_side from, std::size_t element_bytes,
                  int columns, int seq, int batch, stream_handle s) {
  const long long count = (long long)seq * batch * columns;
  if (count == 0) return;
  const int blocks = detail::grid_blocks(count);
  switch (element_bytes) {
    case 2:
      copy_columns_kernel<<<blocks, detail::grid_threads, 0, s>>>(static_cast<std::uint16_t*>(dst), to,
                                                                  static_cast<const std::uint16_t*>(src), from,
                                                                  columns, seq, batch);
      break;
    case 4:
      copy_columns_kernel<<<blocks, detail::grid_threads, 0, s>>>(static_cast<std::uint32_t*>(dst), to,
                                                                  static_cast<const std::uint32_t*>(src), from,
                                                                  columns, seq, batch);
      break;
    case 8:
      copy_columns_kernel<<<blocks, detail::grid_threads, 0, s>>>(static_cast<std::uint64_t*>(dst), to,
                                                                  static_cast<const std::uint64_t*>(src), from,
                                                                  columns, seq, batch);
      break;
    default: throw std::invalid_argument("cuda copy_columns: elements of " + std::to_string(element_bytes) + " bytes");
  }
  detail::check_launch("copy_columns");
}

void causal_conv1d_forward(float* y, const float* x, const float* w, const float* bias, int batch, int seq,
                           int channels, int width, bool silu, stream_handle s) {
  const long long count = (long long)batch * seq * channels;
  if (count == 0) return;
  conv_forward_kernel<<<detail::grid_blocks(count), detail::grid_threads, 0, s>>>(y, x, w, bias, batch, seq, channels,
                                                                                 width, silu);
  detail::check_launch("causal_conv1d_forward");
}

void causal_conv1d_backward(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                            const float* bias, float* dpre, int batch, int seq, int channels, int width, bool silu,
                            stream_handle s) {
  const long long count = (long long)batch * seq * channels;
  if (count == 0) return;
  const int blocks = detail::grid_blocks(count);
  conv_dpre_kernel<<<blocks, detail::grid_threads, 0, s>>>(dpre, dy, x, w, bias, batch, seq, channels, width, silu);
  detail::check_launch("causal_conv1d_backward (pre-activation)");
  if (dx) {
    conv_dx_kernel<<<blocks, detail::grid_threads, 0, s>>>(dx, dpre, w, batch, seq, channels, width);
    detail::check_launch("causal_conv1d_backward (input)");
  }
  if (dw || dbias) {
    conv_weight_kernel<<<channels, threads, 0, s>>>(dw, dbias, dpre, x, batch, seq, channels, width);
    detail::check_launch("causal_conv1d_backward (weights)");
  }
}

void gated_rmsnorm_forward(float* y, float* rstd, const float* x, const float* z, const float* weight, int n, int d,
                           int group_size, float eps, stream_handle s) {
  if (n == 0 || d == 0) return;
  gated_forward_kernel<<<unsigned((long long)n * (d / group_size)), threads, 0, s>>>(y, rstd, x, z, weight, d,
                                                                                    group_size, eps);
  detail::check_launch("gated_rmsnorm_forward");
}

void gated_rmsnorm_backward(float* dx, float* dz, float* dweight, const float* dy, const float* x, const float* z,
                            const float* weight, const float* rstd, int n, int d, int group_size, stream_handle s) {
  if (n == 0 || d == 0) return;
  if (dx) {
    gated_backward_kernel<<<unsigned((long long)n * (d / group_size)), threads, 0, s>>>(dx, dz, dy, x, z, weight, rstd,
                                                                                       d, group_size);
    detail::check_launch("gated_rmsnorm_backward");
  }
  if (dweight) {
    gated_weight_kernel<<<detail::grid_blocks(d), detail::grid_threads, 0, s>>>(dweight, dy, x, z, rstd, n, d,
                                                                                group_size);
    detail::check_launch("gated_rmsnorm_backward (weight)");
  }
}

}  // namespace mactor::kernels::cuda
