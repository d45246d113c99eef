// The model's dtype is a config value, not a template argument: parameters, gradients and
// activations take it, the kernels dispatch on it, and memory is counted by what it holds.
#include <catch2/catch.hpp>

#include "model/gpt_chunk.hpp"
#include "model/gpt_model.hpp"
#include "tensor/memory_ledger.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

template <class T>
std::vector<double> grads_as_double(model::gpt_model& m) {
  std::vector<double> out;
  for (const auto& p : m.parameters())
    for (T g : p.grad.host<T>()) out.push_back(double(g));
  return out;
}

}  // namespace

TEST_CASE("a model in fp64 (config.params_dtype) holds fp64 tensors and agrees with the fp32 model") {
  for (auto c : {test::llama_style(), test::gpt2_style()}) {
    model::single_group tp;
    model::gpt_model single(c, tp), twice(test::in_double(c), tp);
    CHECK(single.store().type() == tensor::dtype::float32);
    CHECK(twice.store().type() == tensor::dtype::float64);
    CHECK(twice.store().value_tensor().nbytes() == 2 * single.store().value_tensor().nbytes());
    for (const auto& p : twice.parameters()) {
      CHECK(p.value.type == tensor::dtype::float64);
      CHECK(p.value.shape == p.shape);
    }
    const auto batch = test::make_batch(2, c.seq_length, c.padded_vocab_size, 4);
    const auto a = single.forward_backward(batch.view(), 0.1);
    const auto b = twice.forward_backward(batch.view(), 0.1);
    // The same initial values (drawn in fp32) and the same batch: fp32 rounding apart, equal.
    CHECK(a.loss_sum == Approx(b.loss_sum).epsilon(1e-5));
    CHECK(test::relative_error(grads_as_double<float>(single), grads_as_double<double>(twice)) < 1e-4);
  }
}

TEST_CASE("activations are counted in the memory ledger, and a second micro-batch holds no more than the first") {
  auto& ledger = tensor::memory_ledger::host();
  const auto c = test::llama_style();
  model::single_group tp;
  const auto before = ledger.usage(tensor::memory_kind::activations).current;
  const auto params_before = ledger.usage(tensor::memory_kind::parameters).current;
  model::gpt_model m(c, tp);
  CHECK(ledger.usage(tensor::memory_kind::parameters).current - params_before ==
        std::int64_t(m.store().value_tensor().nbytes()));
  const auto batch = test::make_batch(2, c.seq_length, c.padded_vocab_size, 4);
  m.forward_backward(batch.view(), 0.1);
  const auto after_one = ledger.usage(tensor::memory_kind::activations).current;
  // At least the residual stream entering each layer and leaving the last: [seq * mb, hidden].
  const std::int64_t stream = std::int64_t(c.num_layers + 1) * c.seq_length * 2 * c.hidden_size * 4;
  CHECK(after_one - before >= stream);
  m.forward_backward(batch.view(), 0.1);
  CHECK(ledger.usage(tensor::memory_kind::activations).current == after_one);
}

TEST_CASE("a chunk refuses an activation of another dtype, naming both") {
  const auto c = test::gpt2_style();
  model::single_group tp;
  model::gpt_chunk second(c, tp, {1, 2, false, true});
  const auto batch = test::make_batch(1, c.seq_length, c.padded_vocab_size, 4);
  std::vector<double> input(second.activation_numel(1), 0.5);
  CHECK_THROWS_WITH(second.forward(0, batch.view(), test::view(input), {}, true, true, 1.0, 0),
                    Catch::Contains("fp64 [80] on cpu into fp32 [5, 16] on cpu") &&
                        Catch::Contains("the dtype and the element count must match"));
}
