// fp32 <-> bf16/fp16: one thread per element (grid-stride loops), through CUDA's conversions.
#include "kernels/cuda/convert.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

__global__ void widen_bf16_kernel(float* dst, const __nv_bfloat16* src, long long n) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) dst[e] = __bfloat162float(src[e]);
}
__global__ void widen_fp16_kernel(float* dst, const __half* src, long long n) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) dst[e] = __half2float(src[e]);
}
__global__ void round_bf16_kernel(__nv_bfloat16* dst, const float* src, long long n) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) dst[e] = __float2bfloat16_rn(src[e]);
}
__global__ void round_fp16_kernel(__half* dst, const float* src, long long n) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride()) dst[e] = __float2half_rn(src[e]);
}

// mactor's 16-bit storage types and CUDA's share their layout: one 16-bit pattern.
static_assert(sizeof(tensor::bfloat16) == sizeof(__nv_bfloat16) && sizeof(tensor::float16) == sizeof(__half));

}  // namespace

void widen_to_float(float* dst, const tensor::bfloat16* src, std::int64_t n, stream_handle s) {
  if (n <= 0) return;
  widen_bf16_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(dst, reinterpret_cast<const __nv_bfloat16*>(src), n);
  detail::check_launch("widen_to_float (bf16)");
}

void widen_to_float(float* dst, const tensor::float16* src, std::int64_t n, stream_handle s) {
  if (n <= 0) return;
  widen_fp16_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(dst, reinterpret_cast<const __half*>(src), n);
  detail::check_launch("widen_to_float (fp16)");
}

void round_from_float(tensor::bfloat16* dst, const float* src, std::int64_t n, stream_handle s) {
  if (n <= 0) return;
  round_bf16_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(dst), src, n);
  detail::check_launch("round_from_float (bf16)");
}

void round_from_float(tensor::float16* dst, const float* src, std::int64_t n, stream_handle s) {
  if (n <= 0) return;
  round_fp16_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(reinterpret_cast<__half*>(dst), src, n);
  detail::check_launch("round_from_float (fp16)");
}

}  // namespace mactor::kernels::cuda
