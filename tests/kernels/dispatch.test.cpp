// Kernels dispatch on the tensors' dtype and device: fp32 and fp64 on the CPU today; anything
// else is an error naming the kernel, never a silent fallback. Sizes are checked at the entry.
#include "kernels/dispatch.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/bias.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"
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
  tensor::tensor fp8({4}, tensor::dtype::float8_e4m3, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::scale(fp8, 2.0), "kernel scale has no implementation for fp8_e4m3 on cpu");
  tensor::tensor f({4}, tensor::dtype::float32, tensor::memory_kind::other);
  tensor::tensor d({4}, tensor::dtype::float64, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::copy(f, d), Catch::Contains("kernel copy got a fp64 tensor on cpu beside a fp32 one"));
  tensor::tensor short_one({3}, tensor::dtype::float32, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::copy(short_one, f), "kernel copy: 4 elements into 3");
}

// The layers call kernels through tensors; each entry point must run exactly the typed CPU
// kernel it dispatches to (the same bits), for both dtypes.
TEMPLATE_TEST_CASE("tensor entry points give the typed kernels' results bit for bit", "", float, double) {
  using T = TestType;
  constexpr auto type = tensor::dtype_of<T>();
  const int rows = 6, in = 5, out = 7;
  auto filled = [&](tensor::shape_type shape, double step) -> tensor::tensor {
    tensor::tensor t(std::move(shape), type, tensor::memory_kind::other);
    auto e = t.host<T>();
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = T(std::sin(step * double(i + 1)));
    return t;
  };
  const tensor::tensor x = filled({rows, in}, 0.7), w = filled({out, in}, 1.3), dy = filled({rows, out}, 0.9);
  tensor::tensor y({rows, out}, type, tensor::memory_kind::other);
  std::vector<T> y_ref(rows * out), dx_ref(rows * in), dw_ref(out * in, T(0));
  kernels::linear_forward(x, w, y, rows, in, out);
  kernels::linear_forward<T>(x.host<T>().data(), w.host<T>().data(), y_ref.data(), rows, in, out);
  CHECK(std::equal(y_ref.begin(), y_ref.end(), y.host<T>().begin()));
  tensor::tensor dx({rows, in}, type, tensor::memory_kind::other), dw({out, in}, type, tensor::memory_kind::other);
  kernels::linear_backward_input(dy, w, dx, rows, in, out);
  kernels::linear_backward_weight(dy, x, dw, rows, in, out);
  kernels::linear_backward_input<T>(dy.host<T>().data(), w.host<T>().data(), dx_ref.data(), rows, in, out);
  kernels::linear_backward_weight<T>(dy.host<T>().data(), x.host<T>().data(), dw_ref.data(), rows, in, out);
  CHECK(std::equal(dx_ref.begin(), dx_ref.end(), dx.host<T>().begin()));
  CHECK(std::equal(dw_ref.begin(), dw_ref.end(), dw.host<T>().begin()));

  // LayerNorm without its bias: the optional argument is an empty view.
  const tensor::tensor gamma = filled({in}, 0.3);
  tensor::tensor ln({rows, in}, type, tensor::memory_kind::other), mean({rows}, type, tensor::memory_kind::other),
      rstd({rows}, type, tensor::memory_kind::other);
  kernels::layernorm_forward(ln, mean, rstd, x, gamma, {}, rows, in, 1e-5, false);
  std::vector<T> ln_ref(rows * in), mean_ref(rows), rstd_ref(rows);
  kernels::layernorm_forward<T>(ln_ref.data(), mean_ref.data(), rstd_ref.data(), x.host<T>().data(),
                                gamma.host<T>().data(), nullptr, rows, in, T(1e-5), false);
  CHECK(std::equal(ln_ref.begin(), ln_ref.end(), ln.host<T>().begin()));
  CHECK(std::equal(rstd_ref.begin(), rstd_ref.end(), rstd.host<T>().begin()));

  // Attention over a [seq, batch] of two heads in one group.
  kernels::attention_dims d;
  d.seq = 3, d.batch = 2, d.heads = 2, d.groups = 1, d.head_dim = 4, d.total_heads = 2;
  const tensor::tensor qkv = filled({d.seq * d.batch, d.qkv_width()}, 0.37);
  tensor::tensor ctx({d.seq * d.batch, d.heads * d.head_dim}, type, tensor::memory_kind::other),
      probs({d.batch * d.heads * d.seq, d.seq}, type, tensor::memory_kind::other);
  kernels::attention_forward(ctx, probs, qkv, d, 0.5, 0.25f, 42);
  std::vector<T> ctx_ref(ctx.numel()), probs_ref(probs.numel());
  kernels::attention_forward<T>(ctx_ref.data(), probs_ref.data(), qkv.host<T>().data(), d, T(0.5), 0.25f, 42);
  CHECK(std::equal(ctx_ref.begin(), ctx_ref.end(), ctx.host<T>().begin()));
  CHECK(std::equal(probs_ref.begin(), probs_ref.end(), probs.host<T>().begin()));
}

TEST_CASE("a tensor entry point refuses short buffers, missing arguments, mixed and unsupported dtypes, naming the kernel and argument") {
  tensor::tensor y({4, 3}, tensor::dtype::float32, tensor::memory_kind::other);
  tensor::tensor bias({2}, tensor::dtype::float32, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::bias_add(y, bias, 4, 3),
                    "kernel bias_add: argument bias holds 2 elements [2], 3 needed");
  CHECK_THROWS_WITH(kernels::bias_add(y, {}, 4, 3), "kernel bias_add: argument bias is missing (3 elements needed)");
  tensor::tensor bias64({3}, tensor::dtype::float64, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::bias_add(y, bias64, 4, 3),
                    Catch::Contains("kernel bias_add got a fp64 tensor on cpu beside a fp32 one"));
  tensor::tensor x({4, 2}, tensor::dtype::float8_e5m2, tensor::memory_kind::other),
      w({3, 2}, tensor::dtype::float8_e5m2, tensor::memory_kind::other),
      out({4, 3}, tensor::dtype::float8_e5m2, tensor::memory_kind::other);
  CHECK_THROWS_AS(kernels::linear_forward(x, w, out, 4, 2, 3), kernels::unsupported_kernel);
  CHECK_THROWS_WITH(kernels::linear_forward(x, w, out, 4, 2, 3),
                    "kernel linear_forward has no implementation for fp8_e5m2 on cpu");
  // bf16 meets fp32 (computed in fp32), but not fp64.
  tensor::tensor y16({4, 3}, tensor::dtype::bfloat16, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::bias_add(y16, bias64, 4, 3),
                    Catch::Contains("kernel bias_add got a fp64 tensor on cpu beside a bf16 one"));
}
