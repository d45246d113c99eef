// The CUDA kernels as a kernel_backend: inputs are copied to the device, the kernel runs on a
// stream of its own, results are copied back.
#pragma once
#include <memory>

#include "tests/kernels/kernel_backend.hpp"

namespace mactor::testing {
std::unique_ptr<kernel_backend> make_cuda_kernel_backend();
}
