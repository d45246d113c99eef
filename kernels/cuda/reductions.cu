// Grid-stride partial sums in double, one per block, then a single block sums the partials.
#include "kernels/cuda/reductions.hpp"

namespace mactor::kernels::cuda {

namespace {

constexpr int blocks = reduction_scratch - 1;
constexpr int threads = 256;

// How partial results combine: sums, or the largest magnitude (NaN wins, as the CPU's amax).
struct plus {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct nan_max {
  __device__ double operator()(double a, double b) const { return (a != a || b != b) ? a + b : fmax(a, b); }
};

template <class Op = plus>
__device__ double block_sum(double v, Op op = {}) {
  __shared__ double partial[threads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0.0;  // the identity of both: magnitudes are never negative
  if (threadIdx.x < 32) {
    v = threadIdx.x < threads / 32 ? partial[threadIdx.x] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;  // valid in thread 0
}

struct square {
  __device__ double operator()(float x) const { return double(x) * double(x); }
};
struct is_zero {
  __device__ double operator()(float x) const { return x == 0.0f ? 1.0 : 0.0; }
};
struct magnitude {
  __device__ double operator()(float x) const { return fabs(double(x)); }
};

template <class F, class Op>
__global__ void partial_sums(const float* x, long long n, double* partial, F f, Op op) {
  double sum = 0.0;
  for (long long i = (long long)blockIdx.x * threads + threadIdx.x; i < n; i += (long long)blocks * threads)
    sum = op(sum, f(x[i]));
  sum = block_sum(sum, op);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

template <class Op>
__global__ void total(double* scratch, Op op) {
  const double sum = block_sum(threadIdx.x < blocks ? scratch[threadIdx.x] : 0.0, op);
  if (threadIdx.x == 0) scratch[blocks] = sum;
}

template <class F, class Op = plus>
void reduce(const char* name, const float* x, std::int64_t n, double* scratch, F f, stream_handle s, Op op = {}) {
  partial_sums<<<blocks, threads, 0, s>>>(x, n, scratch, f, op);
  detail::check_launch(name);
  total<<<1, threads, 0, s>>>(scratch, op);
  detail::check_launch(name);
}

}  // namespace

void sum_of_squares(const float* x, std::int64_t n, double* scratch, stream_handle s) {
  reduce("sum_of_squares", x, n, scratch, square{}, s);
}

void count_zeros(const float* x, std::int64_t n, double* scratch, stream_handle s) {
  reduce("count_zeros", x, n, scratch, is_zero{}, s);
}

void amax(const float* x, std::int64_t n, double* scratch, stream_handle s) {
  reduce("amax", x, n, scratch, magnitude{}, s, nan_max{});
}

}  // namespace mactor::kernels::cuda
