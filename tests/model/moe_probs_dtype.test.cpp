// The routing probabilities keep the logits' dtype, as in Megatron-Core: under --moe-router-dtype
// fp32 a bf16 model's experts multiply their activations by the fp32 probabilities, unrounded
// (act(x) * probs in fp32, then cast to bf16: experts.py's activation_func_with_probs), and the
// probabilities' gradient comes back in fp32. With --moe-apply-probs-on-input the product probs * x
// is formed in fp32 and cast back to the activations' dtype, as experts.py does
// (`permuted_probs.unsqueeze(-1) * permuted_local_hidden_states` then `.to(original_dtype)`).
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/convert.hpp"
#include "model/moe_experts.hpp"
#include "model/moe_layer.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

constexpr int hidden = 12, rows = 4;

model::gpt_model_config bf16_experts() {
  model::gpt_model_config c;
  c.num_layers = 1, c.hidden_size = hidden, c.ffn_hidden_size = 20, c.swiglu = true, c.add_bias_linear = false;
  c.init_method_std = 0.3f, c.seed = 5, c.params_dtype = tensor::dtype::bfloat16;
  c.moe.num_experts = 2, c.moe.router_topk = 1, c.moe.ffn_hidden_size = 10;
  return c;
}

struct expert_pass {
  std::vector<float> out, dprobs;
};

// The experts' input rows: a fixed draw, each a bf16 value.
std::vector<float> input_rows() {
  std::vector<float> xs;
  for (auto v : test::random_vector(std::size_t(rows) * hidden, 7)) xs.push_back(float(v));
  return xs;
}

// All rows to expert 0, with the given probabilities (of `probs_type`) on the activation's output,
// or on the input rows `xs` with --moe-apply-probs-on-input; dout all ones.
expert_pass run(const std::vector<float>& probs, tensor::dtype probs_type, bool on_input = false,
                const std::vector<float>& xs = input_rows()) {
  auto c = bf16_experts();
  c.moe.apply_probs_on_input = on_input;
  model::parameter_store store(tensor::dtype::bfloat16, tensor::dtype::float32);
  model::moe_experts experts(store, "decoder.layers.0.mlp.experts", c);
  store.allocate(c.seed, 0, 1);
  tensor::tensor x({rows, hidden}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
  kernels::convert(x.view(), tensor::view_of(std::span<const float>(xs)));
  tensor::tensor p({rows, 1}, probs_type, tensor::memory_kind::activations);
  kernels::convert(p.view(), tensor::view_of(std::span<const float>(probs)));
  tensor::tensor out({rows, hidden}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
  tensor::tensor dout({rows, hidden}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
  tensor::tensor dx({rows, hidden}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
  tensor::tensor dp({rows, 1}, probs_type, tensor::memory_kind::activations);
  const std::vector<float> ones(std::size_t(rows) * hidden, 1.0f);
  kernels::convert(dout.view(), tensor::view_of(std::span<const float>(ones)));
  experts.forward(store, x.view(), p.view(), {rows, 0}, out.view());
  experts.backward(store, dout.view(), x.view(), dx.view(), dp.view());
  expert_pass r{std::vector<float>(std::size_t(rows) * hidden), std::vector<float>(rows)};
  kernels::convert(tensor::view_of(std::span<float>(r.out)), out.view());
  kernels::convert(tensor::view_of(std::span<float>(r.dprobs)), dp.view());
  return r;
}

float through_bf16(float v) {
  tensor::tensor t({1}, tensor::dtype::bfloat16, tensor::memory_kind::other);
  kernels::convert(t.view(), tensor::view_of(std::span<const float>(&v, 1)));
  float back = 0;
  kernels::convert(tensor::view_of(std::span<float>(&back, 1)), t.view());
  return back;
}

}  // namespace

TEST_CASE("a bf16 model's experts multiply by fp32 routing probabilities unrounded, and return their gradient in fp32") {
  const std::vector<float> probs{0.3f, 0.7f, 0.11f, 0.93f};  // none of them a bf16 value
  std::vector<float> rounded;
  for (float v : probs) rounded.push_back(through_bf16(v));
  REQUIRE(rounded != probs);
  const auto wide = run(probs, tensor::dtype::float32);
  const auto wide_rounded = run(rounded, tensor::dtype::float32);
  const auto narrow = run(probs, tensor::dtype::bfloat16);
  // bf16 probabilities are the rounded ones, whichever dtype carries them.
  CHECK(narrow.out == wide_rounded.out);
  // fp32 probabilities reach the product unrounded: the outputs move.
  CHECK(wide.out != wide_rounded.out);
  // dprobs = rowdot(dscaled, act) kept in fp32: not all of it is a bf16 value.
  bool wider_than_bf16 = false;
  for (float g : wide.dprobs) wider_than_bf16 = wider_than_bf16 || through_bf16(g) != g;
  CHECK(wider_than_bf16);
  for (float g : narrow.dprobs) CHECK(through_bf16(g) == g);
}

TEST_CASE("with the probabilities on the input, a bf16 model's experts see fp32 probs times x cast once to bf16") {
  const std::vector<float> probs{0.3f, 0.7f, 0.11f, 0.93f};  // none of them a bf16 value
  std::vector<float> rounded;
  for (float v : probs) rounded.push_back(through_bf16(v));
  REQUIRE(rounded != probs);
  // Megatron's input: the product of the bf16 row (exact in fp32) and the fp32 probability,
  // formed in fp32 and rounded to bf16 once; the activation's output is then scaled by ones.
  const std::vector<float> xs = input_rows();
  std::vector<float> product(xs.size()), product_of_rounded(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    product[i] = through_bf16(through_bf16(xs[i]) * probs[i / hidden]);
    product_of_rounded[i] = through_bf16(through_bf16(xs[i]) * rounded[i / hidden]);
  }
  REQUIRE(product != product_of_rounded);
  const std::vector<float> ones(rows, 1.0f);
  const auto wide = run(probs, tensor::dtype::float32, true);
  CHECK(wide.out == run(ones, tensor::dtype::float32, true, product).out);
  // Rounding the probabilities to bf16 first would give other inputs and other outputs.
  CHECK(wide.out != run(ones, tensor::dtype::float32, true, product_of_rounded).out);
  // dprobs = rowdot(d(probs * x), x), kept in fp32: not all of it is a bf16 value.
  bool wider_than_bf16 = false;
  for (float g : wide.dprobs) wider_than_bf16 = wider_than_bf16 || through_bf16(g) != g;
  CHECK(wider_than_bf16);
}

TEST_CASE("the MoE layer carries fp32 probabilities under --moe-router-dtype in a 16-bit model, else the activations' dtype") {
  auto c = bf16_experts();
  c.moe.router_topk = 2;
  model::single_group tp;
  const auto probs_type_of = [&](std::optional<tensor::dtype> router, tensor::dtype params) {
    auto k = c;
    k.params_dtype = params, k.moe.router_dtype = router;
    model::parameter_store store(params, tensor::dtype::float32);
    model::moe_layer layer(store, "decoder.layers.0.mlp", k);
    store.allocate(k.seed, 0, 1);
    const int seq = 3, batch = 2;
    tensor::tensor x({seq * batch, hidden}, params, tensor::memory_kind::activations);
    tensor::tensor out({seq * batch, hidden}, params, tensor::memory_kind::activations);
    std::vector<float> xs;
    for (auto v : test::random_vector(std::size_t(seq * batch) * hidden, 9)) xs.push_back(float(v));
    kernels::convert(x.view(), tensor::view_of(std::span<const float>(xs)));
    layer.forward(store, tp, x.view(), out.view(), seq, batch, true);
    return layer.permuted_probs_type();
  };
  CHECK(probs_type_of(tensor::dtype::float32, tensor::dtype::bfloat16) == tensor::dtype::float32);
  CHECK(probs_type_of(std::nullopt, tensor::dtype::bfloat16) == tensor::dtype::bfloat16);
  CHECK(probs_type_of(tensor::dtype::float32, tensor::dtype::float32) == tensor::dtype::float32);
}
