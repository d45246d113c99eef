// The tensor type: shapes, dtypes, zero-filled ownership, views and row slices, and the errors
// for using a tensor as another type or on another device.
#include "tensor/tensor.hpp"

#include <catch2/catch.hpp>
#include <vector>

using namespace mactor::tensor;

TEST_CASE("a tensor owns zero-filled bytes of its shape and dtype") {
  tensor t({2, 3, 4}, dtype::float64, memory_kind::activations);
  CHECK(t.defined());
  CHECK(t.numel() == 24);
  CHECK(t.nbytes() == 24 * 8);
  CHECK(t.shape() == shape_type{2, 3, 4});
  CHECK(t.where() == cpu);
  for (double x : t.host<double>()) CHECK(x == 0.0);
  CHECK(size_of(dtype::bfloat16) == 2);
  CHECK(size_of(dtype::float8_e4m3) == 1);
  tensor half({5}, dtype::bfloat16, memory_kind::activations);
  CHECK(half.nbytes() == 10);
}

TEST_CASE("a default or moved-from tensor is empty and undefined") {
  tensor empty;
  CHECK_FALSE(empty.defined());
  CHECK(empty.numel() == 0);
  CHECK(empty.host<float>().empty());
  tensor t({3}, dtype::float32, memory_kind::other);
  t.host<float>()[1] = 7;
  tensor moved = std::move(t);
  CHECK_FALSE(t.defined());
  CHECK(t.numel() == 0);
  CHECK(moved.host<float>()[1] == 7);
}

TEST_CASE("clone copies the bytes, and reshape keeps them and refuses another element count") {
  tensor t({2, 3}, dtype::float32, memory_kind::other);
  for (int i = 0; i < 6; ++i) t.host<float>()[i] = static_cast<float>(i);
  tensor c = t.clone();
  t.host<float>()[0] = 100;
  CHECK(c.host<float>()[0] == 0);
  CHECK(c.host<float>()[5] == 5);
  c.reshape({3, 2});
  CHECK(c.shape() == shape_type{3, 2});
  CHECK_THROWS_WITH(c.reshape({4, 2}), "cannot reshape a tensor of shape [3, 2] to [4, 2]");
}

TEST_CASE("a view's rows are the first dimension's slices over the same bytes") {
  tensor t({4, 3}, dtype::float32, memory_kind::other);
  for (int i = 0; i < 12; ++i) t.host<float>()[i] = static_cast<float>(i);
  auto middle = t.view().rows(1, 3);
  CHECK(middle.shape == shape_type{2, 3});
  CHECK(middle.host<float>()[0] == 3);
  middle.host<float>()[5] = -1;
  CHECK(t.host<float>()[8] == -1);
  const_tensor_view all = t.view();
  CHECK(all.rows(3, 4).host<float>()[2] == 11);
  CHECK_THROWS_AS(t.view().rows(2, 5), tensor_error);
}

TEST_CASE("using a tensor as another dtype, or a device this build lacks, names both") {
  tensor t({2}, dtype::bfloat16, memory_kind::other);
  CHECK_THROWS_WITH(t.host<float>(), "a bf16 tensor on cpu used as fp32 on the host");
  CHECK_THROWS_WITH(tensor({2}, dtype::float32, memory_kind::other, device{device_type::cuda, 1}),
                    Catch::Contains("cuda:1"));
  std::vector<double> owned{1, 2, 3};
  auto v = view_of(std::span<double>(owned));
  CHECK(v.type == dtype::float64);
  CHECK(v.shape == shape_type{3});
}

TEST_CASE("dtype names follow Megatron's flags and PyTorch's names") {
  CHECK(parse_dtype("bf16") == dtype::bfloat16);
  CHECK(parse_dtype("torch.float8_e4m3fn") == dtype::float8_e4m3);
  CHECK(torch_name(dtype::float16) == "torch.float16");
  CHECK_FALSE(parse_dtype("fp12"));
  CHECK(is_floating_point8(dtype::float8_e5m2));
  CHECK_FALSE(is_floating_point8(dtype::float16));
}
