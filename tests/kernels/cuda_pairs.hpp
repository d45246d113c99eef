// What the CUDA entry-point tests share: host and device tensors holding the same random values,
// the check that a device result agrees with the host's, and the start that skips the test
// without a device.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>

#include "kernels/cuda/tensor_kernels.hpp"
#include "tensor/cuda/copy.hpp"
#include "tensor/cuda/current_stream.hpp"
#include "tensor/tensor.hpp"
#include "tests/require_cuda_device.hpp"

namespace mactor::test {

inline const tensor::device gpu{tensor::device_type::cuda, 0};

// A host tensor of `n` fp32 values in [-scale, scale), and the same on the device.
struct pair {
  tensor::tensor host, device;
};

inline pair random_pair(std::int64_t n, std::mt19937& rng, float scale = 1.f) {
  pair p{tensor::tensor({n}, tensor::dtype::float32, tensor::memory_kind::other),
         tensor::tensor({n}, tensor::dtype::float32, tensor::memory_kind::other, gpu)};
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (auto& v : p.host.host<float>()) v = dist(rng);
  mactor::cuda::copy(p.device, p.host, mactor::cuda::current_stream());
  return p;
}

// The device tensor's values next to the host's: within tolerance * (1 + |host|) each.
inline void require_same(const char* what, const pair& p, double tolerance) {
  const auto back = mactor::cuda::to_host(p.device, tensor::memory_kind::other, mactor::cuda::current_stream());
  const auto got = back.host<float>(), want = p.host.host<float>();
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::abs(got[i] - want[i]) > tolerance * (1 + std::abs(want[i])))
      FAIL(what << "[" << i << "]: device " << got[i] << ", host " << want[i]);
  SUCCEED(what << ": " << want.size() << " elements agree");
}

inline void start_on_device() {
  kernels::cuda::enable_cuda_backend();
  testing::require_cuda_device();
}

}  // namespace mactor::test
