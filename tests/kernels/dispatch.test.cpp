// Kernels dispatch on the tensors' dtype and device: fp32 and fp64 on the CPU today; anything
// else is an error naming the kernel, never a silent fallback.
#include "kernels/dispatch.hpp"

#include <catch2/catch.hpp>

#include "kernels/tensor_ops.hpp"

using namespace mactor;

TEST_CASE("element-wise kernels run on fp32 and fp64 tensors") {
  tensor::tensor f({4}, tensor::dtype::float32, tensor::memory_kind::other);
  tensor::tensor d({4}, tensor::dtype::float64, tensor::memory_kind::other);
  for (int i = 0; i < 4; ++i) f.host<float>()[i] = 1.5f * i, d.host<double>()[i] = 0.25 * i;
  kernels::scale(f, 2.0);
  kernels::scale(d, -4.0);
  CHECK(f.host<float>()[3] == 9.0f);
  CHECK(d.host<double>()[2] == -2.0);
  tensor::tensor g({2}, tensor::dtype::float32, tensor::memory_kind::other);
  kernels::copy(g, f.view().rows(1, 3));
  CHECK(g.host<float>()[1] == 6.0f);
  kernels::fill_zero(f.view().rows(2, 4));
  CHECK(f.host<float>()[1] == 3.0f);
  CHECK(f.host<float>()[2] == 0.0f);
}

TEST_CASE("a kernel without an implementation for a dtype, or mixed dtypes, is an error naming the kernel") {
  tensor::tensor half({4}, tensor::dtype::float16, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::scale(half, 2.0), "kernel scale has no implementation for fp16 on cpu");
  tensor::tensor f({4}, tensor::dtype::float32, tensor::memory_kind::other);
  tensor::tensor d({4}, tensor::dtype::float64, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::copy(f, d), Catch::Contains("kernel copy got a fp64 tensor on cpu beside a fp32 one"));
  tensor::tensor short_one({3}, tensor::dtype::float32, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::copy(short_one, f), "kernel copy: 4 elements into 3");
}
