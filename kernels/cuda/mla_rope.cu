// One thread block per rotated vector: its rot_dim values into shared memory, then each thread
// writes its outputs from them (the CPU kernel's temporary row).
#include "kernels/cuda/mla_rope.hpp"

namespace mactor::kernels::cuda {

namespace {

constexpr int threads = 128;

__global__ void mla_rope_kernel(float* x, const float* cos, const float* sin, int batch, int heads,
                                long long row_stride, long long head_stride, long long offset, int rot_dim,
                                bool inverse) {
  extern __shared__ float in[];
  const long long vector = blockIdx.x;  // (s * batch + b) * heads + h
  const int h = int(vector % heads);
  const long long row = vector / heads;  // s * batch + b
  const long long s = row / batch;
  float* v = x + row * row_stride + h * head_stride + offset;
  const int half = rot_dim / 2;
  const float* c = cos + s * half;
  const float* n = sin + s * half;
  for (int i = threadIdx.x; i < rot_dim; i += blockDim.x) in[i] = v[i];
  __syncthreads();
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    if (!inverse) {  // pairs (2i, 2i + 1) in, halves (i, i + half) out
      v[i] = __fsub_rn(__fmul_rn(in[2 * i], c[i]), __fmul_rn(in[2 * i + 1], n[i]));
      v[i + half] = __fadd_rn(__fmul_rn(in[2 * i + 1], c[i]), __fmul_rn(in[2 * i], n[i]));
    } else {  // the transpose: halves in, pairs out
      v[2 * i] = __fadd_rn(__fmul_rn(in[i], c[i]), __fmul_rn(in[i + half], n[i]));
      v[2 * i + 1] = __fsub_rn(__fmul_rn(in[i + half], c[i]), __fmul_rn(in[i], n[i]));
    }
  }
}

}  // namespace

void mla_rope_apply(float* x, const float* cos, const float* sin, int seq, int batch, int heads,
                    std::int64_t row_stride, std::int64_t head_stride, std::int64_t offset, int rot_dim,
                    bool inverse, stream_handle s) {
  const long long vectors = (long long)seq * batch * heads;
  if (vectors == 0 || rot_dim == 0) return;
  mla_rope_kernel<<<unsigned(vectors), threads, rot_dim * sizeof(float), s>>>(
      x, cos, sin, batch, heads, row_stride, head_stride, offset, rot_dim, inverse);
  detail::check_launch("mla_rope_apply");
}

}  // namespace mactor::kernels::cuda
