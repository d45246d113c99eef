// Tensor-parallel models (tp = 2 and 4, ranks as threads of one process) against tp = 1: the
// same loss and, once each rank's shards are placed back, the same gradients.
#include <catch2/catch.hpp>
#include <thread>

#include "model/local_group.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

struct run_result {
  model::loss_and_count loss;
  std::vector<std::vector<float>> full_grads;  // per parameter, tp=1 layout
};

// Two micro-batches of forward+backward (gradient accumulation, fresh dropout masks each).
run_result run(model::gpt_model_config c, int tp_size) {
  const auto b0 = test::make_batch(3, c.seq_length, c.padded_vocab_size, 21);
  const auto b1 = test::make_batch(3, c.seq_length, c.padded_vocab_size, 22);
  auto groups = model::make_local_groups(tp_size);
  run_result result;
  std::vector<std::unique_ptr<model::gpt_model>> models(tp_size);
  std::vector<model::loss_and_count> losses(tp_size);
  std::vector<std::thread> ranks;
  for (int r = 0; r < tp_size; ++r)
    ranks.emplace_back([&, r] {
      auto rc = c;
      rc.tensor_model_parallel_size = tp_size, rc.tensor_model_parallel_rank = r;
      models[r] = std::make_unique<model::gpt_model>(rc, *groups[r]);
      const auto first = models[r]->forward_backward(b0.view(), 0.05f);
      const auto second = models[r]->forward_backward(b1.view(), 0.05f);
      losses[r] = {first.loss_sum + second.loss_sum, first.num_tokens + second.num_tokens};
    });
  for (auto& t : ranks) t.join();
  for (int r = 1; r < tp_size; ++r) CHECK(losses[r].loss_sum == losses[0].loss_sum);
  result.loss = losses[0];
  const auto& params0 = models[0]->parameters();
  for (std::size_t i = 0; i < params0.size(); ++i) {
    std::size_t numel = 1;
    for (auto d : params0[i].full_shape) numel *= std::size_t(d);
    std::vector<float> full(numel);
    for (int r = 0; r < tp_size; ++r) {
      const auto& p = models[r]->parameters()[i];
      model::place_shard(p.grad_as<float>(), full.data(), p.full_shape, p.split, r, tp_size);
    }
    result.full_grads.push_back(std::move(full));
  }
  return result;
}

// loss_tolerance, grad_tolerance: relative; an fp32 model's sums differ only in order (1e-6 and
// 1e-5), a bf16 model's also in where partial results are rounded to bf16.
void check_against_tp1(const model::gpt_model_config& c, double loss_tolerance = 1e-6,
                       double grad_tolerance = 1e-5) {
  const auto reference = run(c, 1);
  model::single_group one;
  model::gpt_model names(c, one);
  for (int tp : {2, 4}) {
    INFO("tp=" << tp);
    const auto got = run(c, tp);
    CHECK(got.loss.num_tokens == reference.loss.num_tokens);
    CHECK(got.loss.loss_sum == Approx(reference.loss.loss_sum).epsilon(loss_tolerance));
    for (std::size_t i = 0; i < got.full_grads.size(); ++i) {
      INFO(names.parameters()[i].name);
      CHECK(test::relative_error(got.full_grads[i], reference.full_grads[i]) < grad_tolerance);
    }
  }
}

}  // namespace

TEST_CASE("llama-style model at tp=2 and tp=4 equals tp=1 in loss and gradients, with dropout") {
  auto c = test::llama_style();
  c.num_attention_heads = 8, c.num_query_groups = 4, c.padded_vocab_size = 32;
  c.attention_dropout = 0.1f, c.hidden_dropout = 0.1f;
  check_against_tp1(c);
}

TEST_CASE("gpt2-style model at tp=2 and tp=4 equals tp=1 in loss and gradients, with dropout") {
  auto c = test::gpt2_style();
  c.padded_vocab_size = 32;
  c.attention_dropout = 0.1f, c.hidden_dropout = 0.1f;
  check_against_tp1(c);
}

TEST_CASE("a bf16 model at tp=2 and tp=4 equals tp=1 within bf16's rounding, with dropout") {
  // The bf16 activations' all-reduces run through fp32 and round once; the fp32 main gradients
  // are compared.
  for (auto c : {test::llama_style(), test::gpt2_style()}) {
    c.num_attention_heads = 8, c.num_query_groups = c.swiglu ? 4 : 0, c.padded_vocab_size = 32;
    c.ffn_hidden_size = 32;
    c.attention_dropout = 0.1f, c.hidden_dropout = 0.1f;
    c.params_dtype = tensor::dtype::bfloat16;
    check_against_tp1(c, 0x1.0p-8, 12 * 0x1.0p-8);
  }
}

TEST_CASE("attention variants at tp=2 and tp=4 equal tp=1: learnable sink split by heads, per-layer window and RoPE") {
  auto c = test::llama_style();
  c.num_layers = 3, c.num_attention_heads = 8, c.num_query_groups = 4, c.padded_vocab_size = 32;
  c.attention_dropout = 0.1f, c.hidden_dropout = 0.1f;
  c.softmax_type = model::softmax_kind::learnable;
  c.window_size = {2, 0}, c.window_attn_skip_freq.every = 3;
  c.no_rope_freq.list = {0, 1, 0};
  c.rotary_interleaved = true, c.rotary_seq_len_interpolation_factor = 2;
  c.use_rope_scaling = true;
  check_against_tp1(c);
  c.softmax_type = model::softmax_kind::off_by_one;
  check_against_tp1(c);
}

TEST_CASE("the model refuses per-layer selectors of the wrong length and a non-causal window") {
  auto c = test::llama_style();  // 2 layers
  CHECK(model::validate(c).empty());
  auto bad = c;
  bad.no_rope_freq.list = {0, 1, 0};
  CHECK(!model::validate(bad).empty());
  bad = c, bad.window_size = {4, 0}, bad.window_attn_skip_freq.list = {1};
  CHECK(!model::validate(bad).empty());
  bad = c, bad.window_size = {4, 2};
  CHECK(!model::validate(bad).empty());
  bad = c, bad.no_rope_freq.every = 3;  // does not divide 2 layers
  CHECK(!model::validate(bad).empty());
  bad = c, bad.window_size = {4, 0}, bad.window_attn_skip_freq.list = {1, 0}, bad.no_rope_freq.every = 2;
  CHECK(model::validate(bad).empty());
}

TEST_CASE("quick GeGLU with a clamp and a linear offset at tp=2 and tp=4 equals tp=1, with dropout") {
  // fc1's [gate; linear] halves are split per rank, so each rank's clamp and gate see its own
  // block of both halves.
  auto c = test::gpt2_style();
  c.padded_vocab_size = 32;
  c.attention_dropout = 0.1f, c.hidden_dropout = 0.1f;
  c.quick_geglu = true, c.activation_func_clamp_value = 0.5f, c.glu_linear_offset = 1.0f;
  check_against_tp1(c);
}
