// Row gathers, ordered scatter-adds, row scaling and row dots for the MoE token dispatch.
#include "kernels/cuda/moe_permute.hpp"

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void gather_rows_kernel(float* out, const float* in, const std::int64_t* rows, long long count, int w) {
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride())
    out[e] = in[rows[e / w] * w + e % w];
}

// Thread j owns column j of every destination row and adds the source rows in order of i.
__global__ void scatter_add_rows_kernel(float* out, const float* in, const std::int64_t* rows, long long n, int w) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= w) return;
  for (long long i = 0; i < n; ++i) out[rows[i] * w + j] += in[i * w + j];
}

__global__ void scale_rows_kernel(float* out, const float* in, const float* scale, long long count, int w) {
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) out[e] = in[e] * scale[e / w];
}

__global__ void row_dots_kernel(float* out, const float* a, const float* b, int w) {
  const long long row = blockIdx.x;
  float sum = 0.0f;
  for (int j = threadIdx.x; j < w; j += blockDim.x) sum += a[row * w + j] * b[row * w + j];
  sum = detail::block_reduce(sum, detail::sum_op{});
  if (threadIdx.x == 0) out[row] = sum;
}

}  // namespace

void gather_rows(float* out, const float* in, const std::int64_t* rows, std::int64_t n, int w, stream_handle s) {
  const long long count = (long long)n * w;
  if (count <= 0) return;
  gather_rows_kernel<<<detail::grid_blocks(count), detail::grid_threads, 0, s>>>(out, in, rows, count, w);
  detail::check_launch("gather_rows");
}

void scatter_add_rows(float* out, const float* in, const std::int64_t* rows, std::int64_t n, int w,
                      stream_handle s) {
  if (n <= 0 || w <= 0) return;
  scatter_add_rows_kernel<<<detail::blocks_for(w, detail::grid_threads), detail::grid_threads, 0, s>>>(out, in, rows, n, w);
  detail::check_launch("scatter_add_rows");
}

void scale_rows(float* out, const float* in, const float* scale, std::int64_t n, int w, stream_handle s) {
  const long long count = (long long)n * w;
  if (count <= 0) return;
  scale_rows_kernel<<<detail::grid_blocks(count), detail::grid_threads, 0, s>>>(out, in, scale, count, w);
  detail::check_launch("scale_rows");
}

void row_dots(float* out, const float* a, const float* b, std::int64_t n, int w, stream_handle s) {
  if (n <= 0) return;
  row_dots_kernel<<<unsigned(n), detail::row_block, 0, s>>>(out, a, b, w);
  detail::check_launch("row_dots");
}

}  // namespace mactor::kernels::cuda
