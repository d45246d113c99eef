// bf16 and fp16 tensors through the kernels: each kernel computes in fp32 on the exactly widened
// inputs and rounds its outputs to nearest-even, so its result equals the fp32 kernel's on the
// widened inputs, rounded. fp32 outputs beside 16-bit inputs (main gradients) are not rounded.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/convert.hpp"
#include "kernels/dropout.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/tensor_ops.hpp"

using namespace mactor;

namespace {

tensor::tensor wavy(tensor::shape_type shape, double step, tensor::dtype type) {
  tensor::tensor wide(shape, tensor::dtype::float32, tensor::memory_kind::other);
  auto e = wide.host<float>();
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = float(std::sin(step * double(i + 1)) * 3.0);
  tensor::tensor out(std::move(shape), type, tensor::memory_kind::other);
  kernels::convert(out, wide);
  return out;
}

std::vector<float> as_floats(const tensor::tensor& t) {
  tensor::tensor wide(t.shape(), tensor::dtype::float32, tensor::memory_kind::other);
  kernels::convert(wide, t);
  auto e = wide.host<float>();
  return {e.begin(), e.end()};
}

// The fp32 result rounded to `type` and widened back: what a 16-bit output must hold.
std::vector<float> rounded(const std::vector<float>& v, tensor::dtype type) {
  std::vector<float> out;
  for (float f : v)
    out.push_back(type == tensor::dtype::bfloat16 ? tensor::to_float(tensor::to_bfloat16(f))
                                                  : tensor::to_float(tensor::to_float16(f)));
  return out;
}

}  // namespace

TEST_CASE("convert widens exactly, narrows to nearest-even, and refuses fp8") {
  tensor::tensor x({5}, tensor::dtype::float32, tensor::memory_kind::other);
  const std::vector<float> values{1.0f, 1.0f + 0x1.0p-8f, 1.0f + 0x1.8p-8f, 70000.0f, -0x1.0p-20f};
  std::copy(values.begin(), values.end(), x.host<float>().begin());
  tensor::tensor b({5}, tensor::dtype::bfloat16, tensor::memory_kind::other);
  tensor::tensor h({5}, tensor::dtype::float16, tensor::memory_kind::other);
  tensor::tensor d({5}, tensor::dtype::float64, tensor::memory_kind::other);
  kernels::convert(b, x);
  kernels::convert(h, x);
  kernels::convert(d, b);
  for (int i = 0; i < 5; ++i) {
    CHECK(b.host<tensor::bfloat16>()[i].bits == tensor::to_bfloat16(values[i]).bits);
    CHECK(h.host<tensor::float16>()[i].bits == tensor::to_float16(values[i]).bits);
    CHECK(d.host<double>()[i] == double(tensor::to_float(tensor::to_bfloat16(values[i]))));
  }
  CHECK(std::isinf(tensor::to_float(h.host<tensor::float16>()[3])));  // 70000 > fp16's max
  tensor::tensor f8({5}, tensor::dtype::float8_e4m3, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::convert(f8, x), "kernel convert has no conversion from fp32 to fp8_e4m3");
  tensor::tensor short_one({4}, tensor::dtype::float32, tensor::memory_kind::other);
  CHECK_THROWS_WITH(kernels::convert(short_one, b), "kernel convert: 5 elements into 4");
}

TEST_CASE("a 16-bit linear layer equals the fp32 GEMM on the widened inputs, rounded once") {
  for (auto type : {tensor::dtype::bfloat16, tensor::dtype::float16}) {
    INFO(tensor::short_name(type));
    const int rows = 9, in = 33, out = 17;
    const auto x = wavy({rows, in}, 0.71, type), w = wavy({out, in}, 1.37, type);
    tensor::tensor y({rows, out}, type, tensor::memory_kind::other);
    kernels::linear_forward(x, w, y, rows, in, out);
    const auto xf = as_floats(x), wf = as_floats(w);
    std::vector<float> ref(rows * out);
    kernels::linear_forward<float>(xf.data(), wf.data(), ref.data(), rows, in, out);
    CHECK(as_floats(y) == rounded(ref, type));

    // The weight gradient accumulates into an fp32 main gradient: no rounding to 16 bits.
    const auto dy = wavy({rows, out}, 0.43, type);
    tensor::tensor main_grad({out, in}, tensor::dtype::float32, tensor::memory_kind::other);
    kernels::fill_zero(main_grad);
    main_grad.host<float>()[0] = 0.125f;
    kernels::linear_backward_weight(dy, x, main_grad, rows, in, out);
    std::vector<float> dw_ref(out * in, 0.0f);
    dw_ref[0] = 0.125f;
    const auto dyf = as_floats(dy);
    kernels::linear_backward_weight<float>(dyf.data(), xf.data(), dw_ref.data(), rows, in, out);
    auto got = main_grad.host<float>();
    CHECK(std::vector<float>(got.begin(), got.end()) == dw_ref);
  }
}

TEST_CASE("a 16-bit norm keeps fp32 statistics and rounds its output, and an in-place 16-bit dropout works") {
  const auto type = tensor::dtype::bfloat16;
  const int n = 4, h = 40;
  const auto x = wavy({n, h}, 0.29, type), gamma = wavy({h}, 0.9, type);
  tensor::tensor y({n, h}, type, tensor::memory_kind::other);
  tensor::tensor mean({n}, tensor::dtype::float32, tensor::memory_kind::other),
      rstd({n}, tensor::dtype::float32, tensor::memory_kind::other);
  kernels::layernorm_forward(y, mean, rstd, x, gamma, {}, n, h, 1e-5, false);
  const auto xf = as_floats(x), gf = as_floats(gamma);
  std::vector<float> yr(n * h), mr(n), rr(n);
  kernels::layernorm_forward<float>(yr.data(), mr.data(), rr.data(), xf.data(), gf.data(), nullptr,
                                    n, h, 1e-5f, false);
  CHECK(as_floats(y) == rounded(yr, type));
  auto rs = rstd.host<float>();
  CHECK(std::vector<float>(rs.begin(), rs.end()) == rr);

  // Output and input the same 16-bit buffer (the embedding's dropout runs in place).
  auto z = wavy({n, h}, 0.5, type);
  const auto before = as_floats(z);
  kernels::dropout_apply(z, z, n * h, 0.3f, 77);
  std::vector<float> zr(n * h);
  kernels::dropout_apply<float>(zr.data(), before.data(), n * h, 0.3f, 77);
  CHECK(as_floats(z) == rounded(zr, type));
}
