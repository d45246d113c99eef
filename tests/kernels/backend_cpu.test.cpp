// The kernel checks (kernel_checks.hpp) on the CPU backend: fp32 CPU kernels against the same
// kernels in double. Runs in every build, so the bodies the CUDA tests share are exercised.
#include <catch2/catch.hpp>

#include "tests/kernels/cpu_kernel_backend.hpp"
#include "tests/kernels/kernel_checks.hpp"

using namespace mactor::testing;

TEST_CASE("cpu backend: gemm fp32 matches double", "[backend][cpu]") { check_gemm(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: gemm bf16 matches double", "[backend][cpu]") { check_gemm_bf16(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: rmsnorm matches double", "[backend][cpu]") { check_rmsnorm(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: layernorm matches double", "[backend][cpu]") { check_layernorm(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: swiglu matches double", "[backend][cpu]") { check_swiglu(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: gelu matches double", "[backend][cpu]") { check_gelu(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: embedding matches double", "[backend][cpu]") { check_embedding(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: cross entropy matches double", "[backend][cpu]") {
  check_cross_entropy(*make_cpu_kernel_backend());
}
TEST_CASE("cpu backend: rope matches double", "[backend][cpu]") { check_rope(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: adam matches double", "[backend][cpu]") { check_adam(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: attention matches double", "[backend][cpu]") { check_attention(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: dropout matches double", "[backend][cpu]") { check_dropout(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: squared relu matches double", "[backend][cpu]") { check_squared_relu(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: moe rows matches double", "[backend][cpu]") { check_moe_rows(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: 16-bit conversions match the host bit for bit", "[backend][cpu]") { check_convert(*make_cpu_kernel_backend()); }
TEST_CASE("cpu backend: bias matches double", "[backend][cpu]") { check_bias(*make_cpu_kernel_backend()); }
