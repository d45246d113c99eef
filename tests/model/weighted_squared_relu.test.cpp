// --use-fused-weighted-squared-relu: TEGroupedMLP's experts apply the routing probability inside
// the squared ReLU. The kernel is checked against megatron-core's own weighted_squared_relu and
// its backward (tests/model/weighted_squared_relu_reference.py): in fp32 bit for bit (the
// probabilities' gradient, a row sum, to 1e-6), and in bf16 as torch.compile's fused kernel
// computes it, those fp32 values rounded once; the unfused path rounds twice and differs. In the
// MoE experts the flag changes a bf16 TEGroupedMLP's numbers and nothing in fp32, nor the
// SequentialMLP's or the legacy GroupedMLP's, as in Megatron.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/convert.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/squared_relu.hpp"
#include "model/moe_experts.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"
#include "tests/model/optimizer_python_reference.hpp"

using namespace mactor;

namespace {

constexpr int rows = 16, width = 24;

tensor::tensor bf16_of(const std::vector<float>& v, std::vector<std::int64_t> shape) {
  tensor::tensor t(std::move(shape), tensor::dtype::bfloat16, tensor::memory_kind::activations);
  kernels::convert(t.view(), tensor::view_of(std::span<const float>(v)));
  return t;
}

std::vector<float> through_bf16(const std::vector<float>& v) { return test::floats_of(bf16_of(v, {std::int64_t(v.size())})); }

std::vector<float> draw(std::size_t n, std::uint64_t seed, double scale) {
  std::vector<float> v;
  for (double d : test::random_vector(n, seed, scale)) v.push_back(float(d));
  return v;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << " " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= rel * std::max(1e-6, double(std::abs(want[i]))));
  }
}

std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

}  // namespace

TEST_CASE("the fused weighted squared ReLU computes megatron-core's, in fp32 and rounded once to bf16") {
  const std::size_t n = std::size_t(rows) * width;
  const auto x = through_bf16(draw(n, 31, 1.0)), dy = through_bf16(draw(n, 32, 1.0));  // bf16 activations
  std::vector<float> w;  // fp32 probabilities, not bf16 values
  for (double d : test::random_vector(rows, 33)) w.push_back(float(0.5 + 0.4 * std::tanh(d)));
  REQUIRE(through_bf16(w) != w);
  const auto ref = test::run_python_reference("weighted_squared_relu_reference.py", "fp32",
                                              {{"rows", rows}, {"width", width}, {"x", x}, {"weights", w}, {"dy", dy}});
  const auto y_ref = ref.at("y").get<std::vector<float>>(), dx_ref = ref.at("dx").get<std::vector<float>>(),
             dw_ref = ref.at("dweights").get<std::vector<float>>();

  SECTION("fp32") {
    std::vector<float> y(n), dx(n), dw(rows);
    kernels::weighted_squared_relu_forward(y.data(), x.data(), w.data(), rows, width);
    kernels::weighted_squared_relu_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rows, width);
    CHECK(y == y_ref);
    CHECK(dx == dx_ref);
    check_close(dw, dw_ref, 1e-6, "dweights");
  }
  SECTION("bf16: megatron-core's fp32 values rounded once; the unfused steps round twice") {
    auto x16 = bf16_of(x, {rows, width}), dy16 = bf16_of(dy, {rows, width});
    tensor::tensor y16({rows, width}, tensor::dtype::bfloat16, tensor::memory_kind::activations),
        dx16({rows, width}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
    std::vector<float> dw(rows);
    const auto wv = tensor::view_of(std::span<const float>(w));
    kernels::weighted_squared_relu_forward(y16.view(), x16.view(), wv, rows, width);
    kernels::weighted_squared_relu_backward(dx16.view(), tensor::view_of(std::span<float>(dw)), dy16.view(), x16.view(),
                                            wv, rows, width);
    CHECK(test::floats_of(y16) == through_bf16(y_ref));
    CHECK(test::floats_of(dx16) == through_bf16(dx_ref));
    check_close(dw, dw_ref, 1e-6, "dweights");

    // The unfused experts: relu(x)^2 rounded to bf16, then times w; (dy * w) rounded, then
    // times 2 relu(x). Each double rounding lands elsewhere for some elements.
    tensor::tensor act({rows, width}, tensor::dtype::bfloat16, tensor::memory_kind::activations),
        scaled({rows, width}, tensor::dtype::bfloat16, tensor::memory_kind::activations),
        dact({rows, width}, tensor::dtype::bfloat16, tensor::memory_kind::activations),
        dx_unfused({rows, width}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
    kernels::squared_relu_forward(act.view(), x16.view(), std::int64_t(n));
    kernels::scale_rows(scaled.view(), act.view(), wv, rows, width);
    kernels::scale_rows(dact.view(), dy16.view(), wv, rows, width);
    kernels::squared_relu_backward(dx_unfused.view(), dact.view(), x16.view(), std::int64_t(n));
    const std::size_t forward_moved = differing(test::floats_of(scaled), test::floats_of(y16)),
                      backward_moved = differing(test::floats_of(dx_unfused), test::floats_of(dx16));
    std::printf("weighted squared ReLU, bf16: the unfused steps differ in %zu of %zu outputs and %zu of %zu input "
                "gradients\n", forward_moved, n, backward_moved, n);
    CHECK(forward_moved > 0);
    CHECK(backward_moved > 0);
  }
}

namespace {

struct expert_pass {
  std::vector<float> out, dx, dprobs;
};

// A squared-ReLU MoE's two experts (rows 0-9 to expert 0, the rest to expert 1), dout all ones.
expert_pass run_experts(tensor::dtype type, bool fused, bool grouped, bool legacy) {
  model::gpt_model_config c;
  c.num_layers = 1, c.hidden_size = 12, c.ffn_hidden_size = 20, c.squared_relu = true, c.add_bias_linear = false;
  c.init_method_std = 0.3f, c.seed = 5, c.params_dtype = type;
  c.moe.num_experts = 2, c.moe.router_topk = 1, c.moe.ffn_hidden_size = 10;
  c.moe.grouped_gemm = grouped, c.moe.legacy_grouped_gemm = legacy, c.fused_weighted_squared_relu = fused;
  model::parameter_store store(type, tensor::dtype::float32);
  model::moe_experts experts(store, "decoder.layers.0.mlp.experts", c);
  store.allocate(c.seed, 0, 1);
  const int h = c.hidden_size;
  const auto xs = through_bf16(draw(std::size_t(rows) * h, 41, 1.0));
  std::vector<float> probs;
  for (double d : test::random_vector(rows, 42)) probs.push_back(float(0.5 + 0.4 * std::tanh(d)));
  const auto make = [&](const std::vector<float>& v, std::vector<std::int64_t> shape, tensor::dtype t) {
    tensor::tensor out(std::move(shape), t, tensor::memory_kind::activations);
    kernels::convert(out.view(), tensor::view_of(std::span<const float>(v)));
    return out;
  };
  auto x = make(xs, {rows, h}, type), p = make(probs, {rows, 1}, tensor::dtype::float32);
  auto dout = make(std::vector<float>(std::size_t(rows) * h, 1.0f), {rows, h}, type);
  tensor::tensor out({rows, h}, type, tensor::memory_kind::activations), dx({rows, h}, type, tensor::memory_kind::activations),
      dp({rows, 1}, tensor::dtype::float32, tensor::memory_kind::activations);
  experts.forward(store, x.view(), p.view(), {10, rows - 10}, out.view());
  experts.backward(store, dout.view(), x.view(), dx.view(), dp.view());
  return {test::floats_of(out), test::floats_of(dx), test::floats_of(dp)};
}

}  // namespace

TEST_CASE("the fused weighted squared ReLU flag changes a bf16 TEGroupedMLP's experts, not fp32 nor the other expert forms") {
  using tensor::dtype;
  const auto unfused = run_experts(dtype::bfloat16, false, true, false), fused = run_experts(dtype::bfloat16, true, true, false);
  CHECK(fused.out != unfused.out);
  CHECK(fused.dx != unfused.dx);
  // The probabilities' gradient sums relu(x)^2 unrounded: within bf16's rounding of the largest.
  double largest = 0, moved = 0;
  for (std::size_t i = 0; i < fused.dprobs.size(); ++i)
    largest = std::max(largest, double(std::abs(unfused.dprobs[i]))),
    moved = std::max(moved, double(std::abs(fused.dprobs[i] - unfused.dprobs[i])));
  CHECK(moved <= 1e-2 * largest);

  const auto fp32 = run_experts(dtype::float32, false, true, false), fp32_fused = run_experts(dtype::float32, true, true, false);
  CHECK(fp32_fused.out == fp32.out);
  CHECK(fp32_fused.dx == fp32.dx);
  CHECK(fp32_fused.dprobs == fp32.dprobs);

  // SequentialMLP (no --moe-grouped-gemm) and the legacy GroupedMLP ignore the flag.
  CHECK(run_experts(dtype::bfloat16, true, false, false).out == run_experts(dtype::bfloat16, false, false, false).out);
  CHECK(run_experts(dtype::bfloat16, true, false, true).out == run_experts(dtype::bfloat16, false, false, true).out);
}
