// --init-model-with-meta-device: a chunk laid out without memory, then holding only a shard of
// its flat layout, draws exactly the values a whole initialization gives those elements (every
// layer kind's own initialization included: a hybrid model's Mamba mixer), with only the shard
// and one parameter's full tensor in memory at a time.
#include <catch2/catch.hpp>

#include <algorithm>

#include "model/gpt_chunk.hpp"
#include "model/local_group.hpp"
#include "tensor/memory_ledger.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

TEST_CASE("a chunk initialized on the meta device holds just its shard with the values of a whole initialization") {
  for (const auto& config : {test::llama_style(), test::hybrid_style("M*-")}) {
    model::single_group tp;
    const model::chunk_layout layout{0, config.num_layers, true, true};
    model::gpt_chunk whole(config, tp, layout);
    const auto all = test::floats_of(whole.store().value_tensor().view());
    const std::size_t n = all.size();
    REQUIRE(n == whole.store().flat_numel());

    auto meta_config = config;
    meta_config.init_model_with_meta_device = true;
    // The two shards of a dp-2 split of one region padded to an even length, and a two-range
    // shard (as with experts in a region of their own).
    const std::size_t half = (n + 1) / 2;
    const std::vector<std::vector<model::held_range>> shards = {
        {{0, half, 0}}, {{half, n, 0}}, {{3, 10, 0}, {n - 5, n, 7}}};
    for (const auto& ranges : shards) {
      model::gpt_chunk meta(meta_config, tp, layout);
      REQUIRE(meta.store().laid_out_only());
      CHECK_FALSE(meta.store().value_tensor().defined());
      CHECK(meta.store().flat_numel() == n);
      std::size_t length = 0;
      for (const auto& r : ranges) length = std::max(length, r.at + (r.end - r.begin));
      length = std::max(length, half);
      auto& ledger = tensor::memory_ledger::host();
      const auto parameters_before = ledger.usage(tensor::memory_kind::parameters).current;
      ledger.reset_peaks();
      meta.materialize_shard(ranges, length);
      CHECK_FALSE(meta.store().laid_out_only());
      // Only the shard is held: no whole values, no gradient buffer.
      CHECK(ledger.usage(tensor::memory_kind::parameters).current - parameters_before == std::int64_t(length * 4));
      CHECK_FALSE(meta.store().grad_tensor().defined());
      // The rest of the initialization's memory is one parameter's full and local tensors.
      std::size_t largest = 0;
      for (const auto& p : whole.parameters()) largest = std::max(largest, p.numel);
      CHECK(ledger.usage(tensor::memory_kind::other).peak <= std::int64_t(2 * largest * 4) +
                                                                   ledger.usage(tensor::memory_kind::other).current);
      const auto held = test::floats_of(meta.store().value_tensor().view());
      std::vector<float> want(length, 0.0f);
      for (const auto& r : ranges)
        for (std::size_t i = r.begin; i < r.end; ++i) want[r.at + (i - r.begin)] = all[i];
      CHECK(held == want);
    }
  }
}
