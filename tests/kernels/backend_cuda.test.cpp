// The kernel checks (kernel_checks.hpp) on the CUDA backend: each CUDA kernel against the CPU
// kernel in double on the same random inputs. Skipped (CTest "Skipped", status 77) without a device.
#include <catch2/catch.hpp>

#include "tests/kernels/cuda_kernel_backend.hpp"
#include "tests/kernels/kernel_checks.hpp"
#include "tests/require_cuda_device.hpp"

using namespace mactor::testing;

namespace {
// The backend, once a device is known to be there.
std::unique_ptr<kernel_backend> cuda_backend() {
  require_cuda_device();
  return make_cuda_kernel_backend();
}
}  // namespace

TEST_CASE("cuda backend: gemm fp32 matches double", "[backend][cuda]") { check_gemm(*cuda_backend()); }
TEST_CASE("cuda backend: gemm bf16 matches double", "[backend][cuda]") { check_gemm_bf16(*cuda_backend()); }
TEST_CASE("cuda backend: rmsnorm matches double", "[backend][cuda]") { check_rmsnorm(*cuda_backend()); }
TEST_CASE("cuda backend: layernorm matches double", "[backend][cuda]") { check_layernorm(*cuda_backend()); }
TEST_CASE("cuda backend: swiglu matches double", "[backend][cuda]") { check_swiglu(*cuda_backend()); }
TEST_CASE("cuda backend: gelu matches double", "[backend][cuda]") { check_gelu(*cuda_backend()); }
TEST_CASE("cuda backend: embedding matches double", "[backend][cuda]") { check_embedding(*cuda_backend()); }
TEST_CASE("cuda backend: cross entropy matches double", "[backend][cuda]") { check_cross_entropy(*cuda_backend()); }
TEST_CASE("cuda backend: rope matches double", "[backend][cuda]") { check_rope(*cuda_backend()); }
TEST_CASE("cuda backend: adam matches double", "[backend][cuda]") { check_adam(*cuda_backend()); }
TEST_CASE("cuda backend: attention matches double", "[backend][cuda]") { check_attention(*cuda_backend()); }
TEST_CASE("cuda backend: dropout matches double", "[backend][cuda]") { check_dropout(*cuda_backend()); }
TEST_CASE("cuda backend: squared relu matches double", "[backend][cuda]") { check_squared_relu(*cuda_backend()); }
TEST_CASE("cuda backend: moe rows matches double", "[backend][cuda]") { check_moe_rows(*cuda_backend()); }
TEST_CASE("cuda backend: 16-bit conversions match the host bit for bit", "[backend][cuda]") { check_convert(*cuda_backend()); }
TEST_CASE("cuda backend: bias matches double", "[backend][cuda]") { check_bias(*cuda_backend()); }
