// --fp8-param-gather's fp8 weights against a second implementation written here: the cast of
// the fp32 main parameters (bf16 rounding, then e4m3 with the scale TE's cast_master_weights_to_fp8
// takes: the delayed history's, or fp8_max over the whole weight's amax), the same bytes when
// two ranks each cast their shard with the amax max-reduced between them, a linear whose GEMMs
// multiply exactly those fp8 values (whatever its 16-bit weight holds), and the bf16 buffer
// without the fp8 weights (the parameter memory the memory ledger counts).
#include "training/fp8_params.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "comm/collectives.hpp"
#include "kernels/convert.hpp"
#include "model/fp8_linear.hpp"
#include "model/gpt_model.hpp"
#include "tensor/float8.hpp"
#include "tensor/memory_ledger.hpp"
#include "tests/comm/in_process_ranks.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

// Round to nearest even into bf16 and back (finite inputs), written out here.
float bf16_round(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint8_t e4m3(float v) { return tensor::to_float8_e4m3(v).bits; }
float from_e4m3(std::uint8_t b) { return tensor::to_float(tensor::float8_e4m3{b}); }

model::gpt_model_config tiny(model::fp8_recipe recipe) {
  auto c = test::gpt2_style();
  c.num_layers = 2, c.hidden_size = 32, c.ffn_hidden_size = 64, c.num_attention_heads = 4;
  c.seq_length = 8, c.max_position_embeddings = 8, c.padded_vocab_size = 32;
  c.params_dtype = tensor::dtype::bfloat16;
  c.fp8.enabled = true, c.fp8.recipe = recipe, c.fp8.fp8_amax_history_len = 4;
  return c;
}

// Moves every main parameter as an optimizer step would (the same on every rank).
void perturb(training::main_params& main, std::size_t numel) {
  std::mt19937 gen(11);
  std::normal_distribution<float> step(0.0f, 0.01f);
  float* v = main.value_at(0, 0);
  for (std::size_t i = 0; i < numel; ++i) v[i] += step(gen);
}

// The bytes and scale_inv of one weight, computed here from its fp32 main values.
struct expected_weight {
  std::vector<std::uint8_t> bytes;
  float scale_inv = 1;
};
expected_weight quantize_here(const float* master, std::size_t n, float scale) {
  expected_weight e;
  for (std::size_t i = 0; i < n; ++i) e.bytes.push_back(e4m3(bf16_round(master[i]) * scale));
  e.scale_inv = 1.0f / scale;
  return e;
}
float current_scale_here(const float* master, std::size_t n) {
  float amax = 0;
  for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(bf16_round(master[i])));
  return 448.0f / amax;
}

}  // namespace

TEST_CASE("the cast of the main parameters gives each fp8 weight e4m3(bf16(master) * scale)") {
  for (auto recipe : {model::fp8_recipe::tensorwise, model::fp8_recipe::delayed}) {
    INFO("recipe " << int(recipe));
    model::single_group tp;
    std::vector<model::gpt_chunk> chunks;
    chunks.emplace_back(tiny(recipe), tp, model::chunk_layout{0, 2, true, true});
    training::main_params main(chunks);
    training::fp8_params fp8(chunks, main);
    const auto numel = chunks[0].store().flat_numel();
    REQUIRE(fp8.weights(0).size() == 8);  // qkv, proj, fc1, fc2 of each of 2 layers
    perturb(main, numel);
    // Delayed: a forward's update has turned the amax the first cast recorded into a scale.
    if (recipe == model::fp8_recipe::delayed)
      for (const auto& w : fp8.weights(0)) w.linear->weight_scaling_state().update();
    std::vector<float> scales;
    for (const auto& w : fp8.weights(0))
      scales.push_back(recipe == model::fp8_recipe::delayed ? w.linear->weight_scaling_state().scale()
                                                            : current_scale_here(main.value_at(0, w.offset), w.numel));
    fp8.cast({{{0, numel}}}, nullptr);
    for (std::size_t k = 0; k < fp8.weights(0).size(); ++k) {
      const auto& w = fp8.weights(0)[k];
      const auto want = quantize_here(main.value_at(0, w.offset), w.numel, scales[k]);
      CHECK(w.scale_inv == want.scale_inv);
      CHECK(std::memcmp(fp8.bytes(0) + w.byte_offset, want.bytes.data(), w.numel) == 0);
      if (recipe == model::fp8_recipe::delayed) CHECK(scales[k] != 1.0f);
    }
  }
}

TEST_CASE("fp8-held weights leave the bf16 buffer: their parameter memory halves, the other weights are kept") {
  model::single_group tp;
  std::vector<model::gpt_chunk> chunks;
  chunks.emplace_back(tiny(model::fp8_recipe::tensorwise), tp, model::chunk_layout{0, 2, true, true});
  auto& store = chunks[0].store();
  training::main_params main(chunks);
  // Every parameter's bf16 values before, widened.
  auto widened = [](tensor::const_tensor_view v) {
    std::vector<float> out(static_cast<std::size_t>(v.numel()));
    kernels::convert(tensor::view_of(std::span<float>(out)), v);
    return out;
  };
  std::vector<std::vector<float>> before;
  for (const auto& p : store.all()) before.push_back(widened(p.value));
  auto& ledger = tensor::memory_ledger::host();
  const auto params_before = ledger.usage(tensor::memory_kind::parameters).current;
  training::fp8_params fp8(chunks, main);
  std::size_t fp8_numel = 0;
  for (const auto& w : fp8.weights(0)) fp8_numel += w.numel;
  REQUIRE(fp8_numel > store.flat_numel() / 2);  // most of this model's weights are GEMM weights
  // Two bytes per fp8 weight element freed, one held as fp8.
  CHECK(params_before - ledger.usage(tensor::memory_kind::parameters).current == std::int64_t(fp8_numel));
  CHECK(std::size_t(store.value_tensor().numel()) == store.flat_numel() - fp8_numel);
  for (std::size_t i = 0; i < store.all().size(); ++i) {
    const auto& p = store.all()[i];
    INFO(p.name);
    if (p.fp8_gemm) {
      CHECK(p.value.data == nullptr);
      continue;
    }
    CHECK(widened(p.value) == before[i]);
    // A step's update reaches the packed place of the parameter.
    *main.value_at(0, p.offset) += 1.0f;
    main.copy_to_model(0, p.offset, p.offset + 1);
    CHECK(widened(p.value)[0] == bf16_round(before[i][0] + 1.0f));
  }
  // The model weights a torch checkpoint saves: the bf16 values and the fp8 weights dequantized.
  auto flat = main.model_values(0);
  fp8.dequantize_into(0, flat);
  for (const auto& w : fp8.weights(0))
    for (std::size_t i = 0; i < w.numel; ++i)
      REQUIRE(flat[w.offset + i] == from_e4m3(fp8.bytes(0)[w.byte_offset + i]) * w.scale_inv);
  CHECK(flat[store.all().front().offset] == bf16_round(before.front()[0] + 1.0f));
}

TEST_CASE("two ranks casting their shards write the bytes of one whole-weight cast, with one scale") {
  for (auto recipe : {model::fp8_recipe::tensorwise, model::fp8_recipe::delayed}) {
    INFO("recipe " << int(recipe));
    const auto failures = comm::testing::run_on_ranks(2, [&](int rank, comm::transport& t) -> std::string {
      comm::transport_communicator group(t, {0, 1}, 1);
      model::single_group tp;
      std::vector<model::gpt_chunk> chunks;
      chunks.emplace_back(tiny(recipe), tp, model::chunk_layout{0, 2, true, true});
      training::main_params main(chunks);
      training::fp8_params fp8(chunks, main);
      const auto numel = chunks[0].store().flat_numel();
      perturb(main, numel);
      // Delayed: a forward's update has turned the first cast's amax into the scale.
      std::vector<float> delayed_scales;
      for (const auto& w : fp8.weights(0)) {
        w.linear->weight_scaling_state().update();
        delayed_scales.push_back(w.linear->weight_scaling_state().scale());
      }
      const std::size_t half = (numel + 1) / 2;
      const training::fp8_params::range mine = rank == 0 ? training::fp8_params::range{0, half}
                                                        : training::fp8_params::range{half, numel};
      fp8.cast({{mine}}, &group);
      for (std::size_t k = 0; k < fp8.weights(0).size(); ++k) {
        const auto& w = fp8.weights(0)[k];
        const float* master = main.value_at(0, w.offset);
        float amax = 0;
        for (std::size_t i = 0; i < w.numel; ++i) amax = std::max(amax, std::fabs(bf16_round(master[i])));
        // Delayed: the scale the history held, and the amax recorded is the whole weight's.
        // Tensorwise: the whole weight's scale.
        const float scale = recipe == model::fp8_recipe::delayed ? delayed_scales[k] : 448.0f / amax;
        if (recipe == model::fp8_recipe::delayed && w.linear->weight_scaling_state().history()[0] != amax)
          return "recorded amax " + std::to_string(w.linear->weight_scaling_state().history()[0]) + " vs " + std::to_string(amax);
        const auto want = quantize_here(master, w.numel, scale);
        if (w.scale_inv != want.scale_inv) return "scale_inv " + std::to_string(w.scale_inv);
        for (std::size_t i = std::max(w.offset, mine.begin); i < std::min(w.offset + w.numel, mine.end); ++i)
          if (fp8.bytes(0)[w.byte_offset + i - w.offset] != want.bytes[i - w.offset])
            return "byte " + std::to_string(i) + " differs from the whole-weight cast";
      }
      return "";
    });
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(failures.empty());
  }
}

TEST_CASE("an fp8 linear with a primary weight multiplies exactly its fp8 values times scale_inv") {
  constexpr int rows = 8, in = 16, out = 12;
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * in), master(out * in), y(rows * out), garbage(out * in, 0.0f);
  for (auto& v : x) v = normal(gen);
  for (auto& v : master) v = 0.05f * normal(gen);
  const float scale = current_scale_here(master.data(), master.size());
  const auto w8 = quantize_here(master.data(), master.size(), scale);
  model::fp8_settings s;
  s.enabled = true, s.recipe = model::fp8_recipe::tensorwise;
  model::fp8_linear linear(s);
  linear.use_primary_weight(w8.bytes.data(), &w8.scale_inv);
  // The 16-bit weight it is handed is ignored: all zeros here.
  linear.forward(tensor::view_of(std::span<const float>(x)), tensor::view_of(std::span<const float>(garbage)),
                 tensor::view_of(std::span<float>(y)), rows, in, out);
  // Here: x through e4m3 with its own current scale, the weight as its fp8 values, in double.
  float xmax = 0;
  for (float v : x) xmax = std::max(xmax, std::fabs(v));
  const float xs = 448.0f / xmax;
  double worst = 0, top = 0;
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double acc = 0;
      for (int i = 0; i < in; ++i)
        acc += double(from_e4m3(e4m3(x[r * in + i] * xs)) * (1.0f / xs)) *
               double(from_e4m3(w8.bytes[o * in + i]) * w8.scale_inv);
      worst = std::max(worst, std::fabs(acc - y[r * out + o]));
      top = std::max(top, std::fabs(acc));
    }
  REQUIRE(top > 0);
  CHECK(worst <= 1e-6 * top);  // fp32 summation of 16 products against double
}
