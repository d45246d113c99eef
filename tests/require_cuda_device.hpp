// For GPU tests: without a CUDA device, say why and end the test process with status 77, which
// the GPU tests' CTest registration (SKIP_RETURN_CODE 77) reports as "Skipped", not "Passed".
// Catch2 v2 has no skip of its own; CTest runs each TEST_CASE in its own process, so ending the
// process skips exactly one test. (Running a GPU test binary by hand stops at its first test.)
#pragma once

#include <cstdio>
#include <cstdlib>

#include "tensor/cuda/device.hpp"

namespace mactor::testing {

inline constexpr int skip_return_code = 77;

inline void require_cuda_device() {
  if (cuda::device_count() > 0) return;
  std::printf("SKIPPED: no CUDA device (%s)\n", cuda::no_device_reason().c_str());
  std::fflush(stdout);
  std::_Exit(skip_return_code);
}

}  // namespace mactor::testing
