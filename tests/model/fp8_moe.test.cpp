// fp8 with experts, multi-latent attention and multi-token prediction: each expert's GEMMs are
// scaled by its own tokens only (Transformer Engine's GroupedLinear keeps one quantizer per GEMM);
// a DeepSeek-style model (MoE with a shared expert, MLA with a query latent, one MTP depth) trains
// close to its fp32 run under every recipe; --first-last-layers-bf16 keeps the decoder's MoE and
// MLA layers out of fp8 while the MTP depth stays in fp8, as Megatron's global MTP fp8 context.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <vector>

#include "model/fp8_recipe.hpp"
#include "model/gpt_model.hpp"
#include "model/moe_experts.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

constexpr int hidden = 16, ffn = 24;

struct expert_run {
  std::vector<float> out, dx, fc1_grad0;
};

// Experts 0 and 1 of a gated MoE under the tensorwise recipe (scales from the current amax):
// rows 0-2 go to expert 0, rows 3-4 to expert 1; dout is all ones.
// legacy: --moe-grouped-gemm --moe-use-legacy-grouped-gemm; clamp: --activation-func-clamp-value.
expert_run run_experts(const std::vector<float>& x, bool fp8, bool legacy = false, std::optional<float> clamp = {}) {
  auto c = test::llama_style();
  c.hidden_size = hidden, c.ffn_hidden_size = ffn, c.init_method_std = 0.2f;
  c.moe.num_experts = 2, c.moe.router_topk = 1, c.moe.legacy_grouped_gemm = legacy;
  c.activation_func_clamp_value = clamp;
  c.fp8.enabled = fp8, c.fp8.recipe = model::fp8_recipe::tensorwise, c.fp8.fp8 = model::fp8_format::hybrid;
  model::parameter_store store;
  model::moe_experts experts(store, "decoder.layers.0.mlp.experts", c);
  store.allocate(11, 0, 1);
  // The legacy GroupedMLP registers weight1 (every fc1) before weight2, under SequentialMLP's
  // names; SequentialMLP registers expert by expert. Either way the same values by name (the
  // store draws each parameter from its own name's stream).
  REQUIRE(store[1].name == (legacy ? "decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight"
                                   : "decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.weight"));
  const int n = int(x.size()) / hidden;
  std::vector<float> probs(std::size_t(n), 1.0f), out(x.size()), dout(x.size(), 1.0f), dx(x.size());
  std::vector<float> dprobs(static_cast<std::size_t>(n));
  const auto xv = tensor::view_of(std::span<const float>(x));
  experts.forward(store, xv, tensor::view_of(std::span<const float>(probs)), {3, 2}, tensor::view_of(std::span<float>(out)));
  store.zero_grad();
  experts.backward(store, tensor::view_of(std::span<const float>(dout)), xv, tensor::view_of(std::span<float>(dx)),
                   tensor::view_of(std::span<float>(dprobs)));
  return {out, dx, test::copy_of<float>(store.grad(0))};  // parameter 0: expert 0's fc1
}

std::vector<float> rows_of(const std::vector<float>& v, int first, int count) {
  return {v.begin() + std::ptrdiff_t(first) * hidden, v.begin() + std::ptrdiff_t(first + count) * hidden};
}

model::gpt_model_config deepseek_style() {
  auto c = test::llama_style();
  c.num_layers = 3, c.hidden_size = 32, c.ffn_hidden_size = 48, c.num_attention_heads = 4, c.num_query_groups = 4;
  c.seq_length = 16, c.max_position_embeddings = 16, c.padded_vocab_size = 64, c.init_method_std = 0.05f;
  c.qk_layernorm = true;
  c.mla.enabled = true, c.mla.q_lora_rank = 12, c.mla.kv_lora_rank = 10;
  c.mla.qk_head_dim = 6, c.mla.qk_pos_emb_head_dim = 4, c.mla.v_head_dim = 5;
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 16, c.moe.grouped_gemm = true;
  c.moe.shared_expert_intermediate_size = 16;
  c.moe.layer_freq_list = {0, 1, 1};
  return c;
}

}  // namespace

TEST_CASE("under fp8 an expert's GEMMs are scaled by its own tokens, never by another expert's", "[fp8]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(5 * hidden);
  for (auto& v : x) v = d(rng);
  auto loud = x;  // expert 1's tokens 64 times larger: the whole block's amax moves, expert 0's does not
  for (int i = 3 * hidden; i < 5 * hidden; ++i) loud[std::size_t(i)] *= 64.0f;

  // The premise: one scale over all five rows would round expert 0's rows differently.
  const auto round_rows = [](const std::vector<float>& v, int n) {
    std::vector<float> out(std::size_t(n) * hidden);
    model::round_through_recipe(tensor::view_of(std::span<float>(out)), tensor::view_of(std::span<const float>(v)), n,
                                hidden, model::fp8_recipe::tensorwise, kernels::fp8_type::e4m3,
                                model::gemm_operand::input, model::gemm_usage::rowwise, 1.0f, 1.0f);
    return out;
  };
  REQUIRE(rows_of(round_rows(x, 5), 0, 3) != rows_of(round_rows(loud, 5), 0, 3));

  const auto quiet_run = run_experts(x, true), loud_run = run_experts(loud, true), plain = run_experts(x, false);
  CHECK(rows_of(quiet_run.out, 0, 3) == rows_of(loud_run.out, 0, 3));
  CHECK(rows_of(quiet_run.dx, 0, 3) == rows_of(loud_run.dx, 0, 3));
  CHECK(quiet_run.fc1_grad0 == loud_run.fc1_grad0);
  CHECK(rows_of(quiet_run.out, 3, 2) != rows_of(loud_run.out, 3, 2));
  // And the GEMMs did round through fp8, to within a few percent of the exact ones.
  CHECK(quiet_run.out != plain.out);
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < plain.out.size(); ++i)
    err += std::pow(quiet_run.out[i] - plain.out[i], 2), norm += std::pow(plain.out[i], 2);
  CHECK(std::sqrt(err / norm) < 0.1);
}

TEST_CASE("a DeepSeek-style model (MoE, MLA, MTP) with fp8 trains close to fp32 under every recipe", "[fp8]") {
  const int steps = 6;
  auto c = deepseek_style();
  c.mtp_num_layers = 1, c.untie_embeddings_and_output_weights = true;
  const auto reference = test::sgd_losses(c, steps);
  REQUIRE(reference.back() < 0.9 * reference.front());
  using R = model::fp8_recipe;
  for (auto recipe : {R::delayed, R::tensorwise, R::mxfp8, R::blockwise}) {
    auto f = c;
    f.fp8.enabled = true, f.fp8.recipe = recipe, f.fp8.fp8 = model::fp8_format::hybrid;
    f.fp8.fp8_amax_history_len = 4, f.fp8.amax_compute_algo = model::fp8_amax_compute_algo::max;
    const auto losses = test::sgd_losses(f, steps);
    INFO("recipe " << int(recipe));
    CHECK(losses.back() < 0.9 * losses.front());
    double largest = 0;
    for (int s = 0; s < steps; ++s) largest = std::max(largest, std::fabs(losses[s] - reference[s]) / reference[s]);
    std::printf("fp8 recipe %d: losses %.5f -> %.5f (fp32 %.5f -> %.5f), largest relative gap %.3g\n", int(recipe),
                losses.front(), losses.back(), reference.front(), reference.back(), largest);
    CHECK(largest < 0.05);
    CHECK(losses != reference);
  }
}

TEST_CASE("first-last-layers-bf16 keeps MoE and MLA layers out of fp8, but not the MTP depth", "[fp8]") {
  auto c = deepseek_style();
  auto bf16_ends = c;
  bf16_ends.fp8.enabled = true, bf16_ends.fp8.recipe = model::fp8_recipe::tensorwise;
  bf16_ends.fp8.first_last_layers_bf16 = true;
  bf16_ends.fp8.num_layers_at_start_in_bf16 = 2, bf16_ends.fp8.num_layers_at_end_in_bf16 = 1;  // all three
  CHECK(test::sgd_losses(bf16_ends, 3) == test::sgd_losses(c, 3));
  c.mtp_num_layers = 1, bf16_ends.mtp_num_layers = 1;
  CHECK(test::sgd_losses(bf16_ends, 3) != test::sgd_losses(c, 3));  // Megatron runs MTP under one global fp8 context
}

TEST_CASE("the legacy GroupedMLP's experts stay in 16 bits under fp8 and gate without clamp or offset", "[fp8]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(5 * hidden);
  for (auto& v : x) v = d(rng);
  const auto plain = run_experts(x, false), te_fp8 = run_experts(x, true), legacy_fp8 = run_experts(x, true, true);
  // grouped_gemm's gmm is no Transformer Engine module: fp8 leaves the legacy experts alone.
  CHECK(legacy_fp8.out == plain.out);
  CHECK(legacy_fp8.dx == plain.dx);
  CHECK(legacy_fp8.fc1_grad0 == plain.fc1_grad0);
  CHECK(te_fp8.out != plain.out);
  // GroupedMLP's glu is silu(gate) * up: a clamp value changes TEGroupedMLP's and SequentialMLP's
  // experts, not the legacy ones.
  const float clamp = 0.1f;
  const auto clamped = run_experts(x, false, false, clamp), legacy_clamped = run_experts(x, false, true, clamp);
  CHECK(clamped.out != plain.out);
  CHECK(legacy_clamped.out == plain.out);
  CHECK(legacy_clamped.dx == plain.dx);
}
