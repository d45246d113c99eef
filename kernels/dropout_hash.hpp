// The dropout masks' generator, shared by the CPU and CUDA kernels (a host-and-device function
// under nvcc): element `index` of stream `seed` is kept when dropout_uniform(seed, index) >= p, so
// both backends draw the same mask bit for bit.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MACTOR_HOST_DEVICE __host__ __device__
#else
#define MACTOR_HOST_DEVICE
#endif

namespace mactor::kernels {

/// Uniform [0, 1) number for (seed, index); deterministic across runs, threads and devices.
MACTOR_HOST_DEVICE inline float dropout_uniform(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // The top 24 bits, exact in float; through uint32 so that the conversion vectorizes.
  return float(std::uint32_t(z >> 40)) * (1.0f / 16777216.0f);
}

}  // namespace mactor::kernels
