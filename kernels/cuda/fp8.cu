// fp8 casts on the device: tensor/float8.hpp's narrowing and widening and kernels/cpu/fp8.cpp's
// block scales, written with CUDA's bit casts (see the header).
#include "kernels/cuda/fp8.hpp"

#include <cfloat>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

// One fp8 layout (tensor/float8.hpp's float8_layout): Man mantissa bits, the exponent's bias, the
// largest finite pattern and the NaN pattern.
template <int Man, int Bias, unsigned MaxBits, unsigned NanBits>
struct layout {
  __device__ static unsigned narrow(float f) {
    const unsigned u = __float_as_uint(f);
    const unsigned sign = (u >> 24) & 0x80u;
    const unsigned a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | NanBits;
    const int e32 = int(a >> 23);
    constexpr int min_normal_e32 = 127 + 1 - Bias;
    if (e32 >= min_normal_e32) {
      constexpr int drop = 23 - Man;
      const unsigned r = (a + ((1u << (drop - 1)) - 1) + ((a >> drop) & 1u)) >> drop;
      const unsigned v = r - (unsigned(127 - Bias) << Man);
      return sign | (v > MaxBits ? MaxBits : v);
    }
    if (e32 == 0) return sign;
    const unsigned mant = (a & 0x7fffffu) | 0x800000u;
    const int shift = 151 - Bias - Man - e32;
    if (shift >= 32) return sign;
    unsigned q = mant >> shift;
    const unsigned rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return sign | q;
  }
  __device__ static float widen(unsigned b, bool nan, bool inf) {
    const unsigned sign = (b & 0x80u) << 24;
    if (nan) return __uint_as_float(sign | 0x7fc00000u);
    if (inf) return __uint_as_float(sign | 0x7f800000u);
    const unsigned exp = (b & 0x7fu) >> Man, mant = b & ((1u << Man) - 1);
    if (exp == 0) {
      const float unit = __uint_as_float(unsigned(127 + 1 - Bias - Man) << 23);
      return __uint_as_float(sign | __float_as_uint(__fmul_rn(float(mant), unit)));
    }
    return __uint_as_float(sign | ((exp - Bias + 127) << 23) | (mant << (23 - Man)));
  }
};
using e4m3 = layout<3, 7, 0x7eu, 0x7fu>;
using e5m2 = layout<2, 15, 0x7bu, 0x7eu>;

__device__ float round_through(float v, float scale, float scale_inv, bool is_e5m2) {
  const float scaled = __fmul_rn(v, scale);
  float w;
  if (is_e5m2) {
    const unsigned b = e5m2::narrow(scaled);
    w = e5m2::widen(b, (b & 0x7fu) > 0x7cu, (b & 0x7fu) == 0x7cu);
  } else {
    const unsigned b = e4m3::narrow(scaled);
    w = e4m3::widen(b, (b & 0x7fu) == 0x7fu, false);
  }
  return __fmul_rn(w, scale_inv);
}

__global__ void round_through_kernel(float* out, const float* x, long long n, float scale, float scale_inv,
                                     bool is_e5m2) {
  for (long long i = detail::first_element(); i < n; i += detail::grid_stride())
    out[i] = round_through(x[i], scale, scale_inv, is_e5m2);
}

// kernels/cpu/fp8.cpp's float_to_e8m0: a positive value's exponent rounded up to a power of two.
__device__ unsigned float_to_e8m0(float v) {
  if (isnan(v)) return 0xffu;
  if (isinf(v)) return 0xfeu;
  if (v == 0.0f) return 0u;
  const unsigned u = __float_as_uint(v);
  unsigned exponent = (u >> 23) & 0xffu;
  const unsigned mantissa = u & 0x7fffffu;
  if (mantissa > 0 && exponent != 0xfeu && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
  return exponent;
}

// {scale, scale_inv} of a block as kernels::block_scale makes them.
__device__ float2 block_scale(float amax, float fp8_max, bool power_of_two) {
  if (power_of_two) {
    float scale = 1.0f;
    if (!(isinf(amax) || amax == 0.0f || isnan(amax))) {
      scale = __fdiv_rn(fp8_max, amax);
      if (isinf(scale)) scale = FLT_MAX;
      scale = __uint_as_float(__float_as_uint(scale) & 0xff800000u);
    }
    return make_float2(scale, __fdiv_rn(1.0f, scale));
  }
  const unsigned e = float_to_e8m0(__fmul_rn(amax, __fdiv_rn(1.0f, fp8_max)));
  const float scale = e == 0 ? 1.0f : __uint_as_float((254u - e) << 23);
  const float scale_inv = e == 0 ? 0x1.0p-127f : __uint_as_float(e << 23);
  return make_float2(scale, scale_inv);
}

// One thread block per fp8 block: its amax (NaN if any element is NaN), then its elements.
__global__ void round_through_blocks_kernel(float* out, const float* x, int rows, int cols, int block_rows,
                                            int block_cols, int grid_cols, bool power_of_two, bool is_e5m2) {
  const int r0 = int(blockIdx.x / grid_cols) * block_rows, c0 = int(blockIdx.x % grid_cols) * block_cols;
  const int r1 = min(rows, r0 + block_rows), c1 = min(cols, c0 + block_cols), w = c1 - c0;
  const long long count = (long long)(r1 - r0) * w;
  float m = 0.0f, nan = 0.0f;
  for (long long k = threadIdx.x; k < count; k += blockDim.x) {
    const float e = x[(long long)(r0 + k / w) * cols + c0 + k % w];
    if (isnan(e)) nan = 1.0f;
    else m = fmaxf(m, fabsf(e));
  }
  m = detail::block_reduce(m, detail::max_op{});
  nan = detail::block_reduce(nan, detail::max_op{});
  const float2 s = block_scale(nan > 0.0f ? __int_as_float(0x7fc00000) : m, is_e5m2 ? 57344.0f : 448.0f, power_of_two);
  for (long long k = threadIdx.x; k < count; k += blockDim.x) {
    const long long i = (long long)(r0 + k / w) * cols + c0 + k % w;
    out[i] = round_through(x[i], s.x, s.y, is_e5m2);
  }
}

}  // namespace

void round_through_fp8(float* out, const float* x, std::int64_t n, float scale, float scale_inv, bool e5m2,
                       stream_handle s) {
  if (n == 0) return;
  round_through_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(out, x, n, scale, scale_inv, e5m2);
  detail::check_launch("round_through_fp8");
}

void round_through_fp8_blocks(float* out, const float* x, int rows, int cols, int block_rows, int block_cols,
                              bool power_of_two, bool e5m2, stream_handle s) {
  if (rows == 0 || cols == 0) return;
  const int grid_rows = (rows + block_rows - 1) / block_rows, grid_cols = (cols + block_cols - 1) / block_cols;
  round_through_blocks_kernel<<<unsigned(grid_rows) * unsigned(grid_cols), 128, 0, s>>>(
      out, x, rows, cols, block_rows, block_cols, grid_cols, power_of_two, e5m2);
  detail::check_launch("round_through_fp8_blocks");
}

}  // namespace mactor::kernels::cuda
