// The delayed fp8 recipe's amax reduction: the MAX all-reduce of model::group alone, and two
// data-parallel replicas (threads with a local group as their amax group) that see different
// micro-batches ending with the same scales in every fp8 linear, while replicas that keep their
// amaxes to themselves (mactor before the reduction) do not.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "model/local_group.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

// Every delayed scale of a chunk's fp8 linears: input, weight, grad_output for each.
std::vector<float> scales_of(model::gpt_chunk& chunk) {
  std::vector<float> out;
  for (const auto* l : chunk.store().fp8_linears()) {
    out.push_back(l->input_scaling().scale());
    out.push_back(l->weight_scaling().scale());
    out.push_back(l->grad_output_scaling().scale());
  }
  return out;
}

model::gpt_model_config fp8_model() {
  auto c = test::gpt2_style();
  c.num_layers = 2, c.hidden_size = 32, c.ffn_hidden_size = 64, c.num_attention_heads = 4;
  c.seq_length = 16, c.max_position_embeddings = 16, c.padded_vocab_size = 64, c.init_method_std = 0.05f;
  c.fp8.enabled = true, c.fp8.recipe = model::fp8_recipe::delayed, c.fp8.fp8 = model::fp8_format::hybrid;
  c.fp8.fp8_amax_history_len = 4, c.fp8.amax_compute_algo = model::fp8_amax_compute_algo::max;
  return c;
}

// Two replicas each run three forward/backward pairs on their own micro-batches (replica r's
// i-th is seed 40 + 2i + r); reduce: the amax group is the two replicas. Returns each replica's
// scales at the end.
std::vector<std::vector<float>> two_replicas(bool reduce) {
  const auto c = fp8_model();
  auto groups = model::make_local_groups(2);
  std::vector<std::vector<float>> scales(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      model::single_group tp;
      model::gpt_chunk chunk(c, tp, {0, c.num_layers, true, true});
      if (reduce) chunk.set_amax_group(groups[r].get());
      for (int i = 0; i < 3; ++i) {
        const auto batch = test::make_batch(2, c.seq_length, c.padded_vocab_size, 40 + 2 * i + r);
        chunk.forward(0, batch.view(), {}, {}, true, true, 1.0, std::uint64_t(i));
        chunk.backward(0, {}, {});
      }
      scales[r] = scales_of(chunk);
    });
  for (auto& t : threads) t.join();
  return scales;
}

}  // namespace

TEST_CASE("group all_reduce_max leaves every rank the elementwise maximum, passing over NaN") {
  for (int size : {1, 2, 3}) {
    auto groups = model::make_local_groups(size);
    std::vector<std::vector<float>> data(static_cast<std::size_t>(size));
    std::vector<std::thread> threads;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int r = 0; r < size; ++r)
      threads.emplace_back([&, r] {
        // Element 0 peaks on the last rank, element 1 on rank 0, element 2 is NaN on rank 0.
        data[std::size_t(r)] = {float(r), float(10 - r), r == 0 ? nan : -1.0f - float(r), -5.0f};
        groups[std::size_t(r)]->all_reduce_max(data[std::size_t(r)].data(), data[std::size_t(r)].size());
      });
    for (auto& t : threads) t.join();
    INFO("group of " << size);
    for (int r = 0; r < size; ++r) {
      const auto& d = data[std::size_t(r)];
      CHECK(d[0] == float(size - 1));
      CHECK(d[1] == 10.0f);
      if (size == 1) CHECK(std::isnan(d[2]));
      else CHECK(d[2] == -2.0f);  // the largest number, the NaN passed over
      CHECK(d[3] == -5.0f);
    }
  }
}

TEST_CASE("data-parallel replicas with an amax group end with the same delayed scales") {
  const auto apart = two_replicas(false);
  REQUIRE(!apart[0].empty());
  CHECK(apart[0] != apart[1]);  // the premise: different micro-batches, different amaxes
  const auto together = two_replicas(true);
  CHECK(together[0] == together[1]);
  // Every scale was updated from a recorded amax (none is still TE's initial 1).
  for (float s : together[0]) CHECK(s != 1.0f);
}
