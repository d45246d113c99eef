// Multi-tensor Adam: the tensors are cut into chunks of chunk_size elements; one launch carries
// up to tensors_per_launch tensors and blocks_per_launch chunks in its (by-value) arguments, and
// each block updates one chunk. The scalars are made on the host in double and rounded to float
// once, as the CPU optimizer does.
#include "kernels/cuda/adam.hpp"


namespace mactor::kernels::cuda {

namespace {

constexpr int chunk_size = 65536;
constexpr int tensors_per_launch = 36;
constexpr int blocks_per_launch = 320;
constexpr int threads = 512;

// What one launch updates: chunk b is elements [chunk[b] * chunk_size, ...) of tensor tensor_of[b].
struct adam_launch {
  adam_tensor tensors[tensors_per_launch];
  unsigned char tensor_of[blocks_per_launch];
  int chunk[blocks_per_launch];
};

// The CPU loop's arithmetic, with its fused multiply-adds (fmaf) and explicitly unfused products
// and sums (__fmul_rn, __fadd_rn: nvcc would otherwise contract them).
__device__ void update(float& value, float g, float& m, float& v, const adam_scalars& k) {
  if (k.decoupled) value = __fmul_rn(value, k.decay);
  else if (k.apply_l2) g = fmaf(k.l2, value, g);
  m = fmaf(k.one_minus_beta1, g, __fmul_rn(m, k.beta1));
  v = __fadd_rn(__fmul_rn(v, k.beta2), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.bias_correction2_sqrt), k.eps);
  value = __fadd_rn(value, __fdiv_rn(__fmul_rn(k.neg_step_size, m), denom));
}

__global__ void adam_kernel(adam_launch launch, adam_scalars k) {
  const adam_tensor& t = launch.tensors[launch.tensor_of[blockIdx.x]];
  const long long begin = (long long)launch.chunk[blockIdx.x] * chunk_size;
  const long long end = begin + chunk_size < t.numel ? begin + chunk_size : t.numel;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x)
    update(t.value[i], t.grad[i], t.exp_avg[i], t.exp_avg_sq[i], k);
}

}  // namespace

void adam_step(std::span<const adam_tensor> tensors, const adam_hyperparameters& h, stream_handle s) {
  const adam_scalars k = adam_scalars_for(h);
  adam_launch launch{};
  int used_tensors = 0, used_blocks = 0;
  auto flush = [&] {
    if (used_blocks > 0) adam_kernel<<<used_blocks, threads, 0, s>>>(launch, k);
    detail::check_launch("adam_step");
    used_tensors = used_blocks = 0;
  };
  for (const adam_tensor& t : tensors) {
    if (t.numel == 0) continue;
    if (used_tensors == tensors_per_launch) flush();
    launch.tensors[used_tensors] = t;
    const long long chunks = (t.numel + chunk_size - 1) / chunk_size;
    for (long long c = 0; c < chunks; ++c) {
      if (used_blocks == blocks_per_launch) {
        flush();
        launch.tensors[0] = t;  // the tensor goes on in the next launch
      }
      launch.tensor_of[used_blocks] = (unsigned char)used_tensors;
      launch.chunk[used_blocks++] = int(c);
    }
    ++used_tensors;
  }
  flush();
}

}  // namespace mactor::kernels::cuda
