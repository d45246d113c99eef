// One test body per kernel, run against any kernel_backend: random inputs over a list of shapes
// (odd ones included), the backend's fp32 result compared with the CPU kernel in double
// precision. kernels_backend_tests runs them on the CPU backend in every build; kernels_cuda_tests
// on the CUDA backend where a device is found.
#pragma once

#include "tests/kernels/kernel_backend.hpp"

namespace mactor::testing {

void check_gemm(kernel_backend& backend);
void check_gemm_bf16(kernel_backend& backend);
void check_rmsnorm(kernel_backend& backend);
void check_layernorm(kernel_backend& backend);
void check_swiglu(kernel_backend& backend);
void check_gelu(kernel_backend& backend);
void check_embedding(kernel_backend& backend);
void check_cross_entropy(kernel_backend& backend);
void check_rope(kernel_backend& backend);
void check_adam(kernel_backend& backend);
// kernel_checks_layers.cpp
void check_attention(kernel_backend& backend);
void check_dropout(kernel_backend& backend);
void check_squared_relu(kernel_backend& backend);
void check_moe_rows(kernel_backend& backend);
void check_convert(kernel_backend& backend);
void check_bias(kernel_backend& backend);

}  // namespace mactor::testing
