// The CPU kernels (fp32) as a kernel_backend.
#pragma once
#include <memory>

#include "tests/kernels/kernel_backend.hpp"

namespace mactor::testing {
std::unique_ptr<kernel_backend> make_cpu_kernel_backend();
}
