// Grad sync on 2-4 in-process ranks against a plain all-reduce of the same gradients: Megatron's
// data-parallel mean with and without gradient buckets reduced during the backward, the
// distributed optimizer's reduce-scattered shards and parameter all-gather (also overlapped),
// and the tied embedding's sum between the first and last pipeline stage.
#include "training/grad_sync.hpp"

#include <catch2/catch.hpp>
#include <random>

#include "comm/collectives.hpp"
#include "comm/local_transport.hpp"
#include "../comm/in_process_ranks.hpp"

using namespace mactor;

namespace {

std::vector<int> all_ranks(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// A chunk of `sizes` parameters tiling one flat buffer; parameter i completes at backward event
// i (the engine's events run from the last one down), values and gradients drawn per rank.
struct fake_chunk {
  std::vector<float> values, grads;
  std::vector<training::synced_param> params;

  fake_chunk(const std::vector<std::size_t>& sizes, int rank, int seed) {
    std::size_t offset = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      params.push_back({offset, sizes[i], static_cast<int>(i), false});
      offset += sizes[i];
    }
    std::mt19937 gen(seed * 100 + rank);
    std::uniform_real_distribution<float> dist(-1, 1);
    values.resize(offset), grads.resize(offset);
    for (auto& v : values) v = dist(gen);
    for (auto& g : grads) g = dist(gen);
  }
  training::synced_chunk synced() {
    return {tensor::view_of(std::span<float>(values)), tensor::view_of(std::span<float>(grads)), params};
  }
};

const std::vector<std::size_t> layer_sizes{7, 130, 33, 1, 64, 250};

// The reference: each rank scales by 1/dp and all-reduces the whole buffer in one call.
std::vector<float> plain_mean(comm::communicator& dp, std::vector<float> grads) {
  for (auto& g : grads) g *= 1.0f / static_cast<float>(dp.size());
  dp.all_reduce(std::span<float>(grads));
  return grads;
}

std::string compare(const std::vector<float>& got, const std::vector<float>& want, std::size_t begin, float tolerance) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    const float g = got[i], w = want[i];
    if (std::abs(g - w) > tolerance * (1 + std::abs(w)))
      return "element " + std::to_string(begin + i) + ": " + std::to_string(g) + " vs " + std::to_string(w);
  }
  return "";
}

}  // namespace

TEST_CASE("grad sync leaves every replica the data-parallel mean a plain all-reduce gives") {
  for (int world : {2, 3, 4})
    for (bool overlap : {false, true}) {
      INFO(world << " ranks" << (overlap ? ", buckets reduced during the backward" : ""));
      const auto failures = comm::testing::run_on_ranks(world, [&](int rank, comm::transport& t) -> std::string {
        comm::transport_communicator dp(t, all_ranks(world), 1), reference_dp(t, all_ranks(world), 2);
        std::vector<fake_chunk> chunks{{layer_sizes, rank, 1}, {layer_sizes, rank, 2}};
        std::vector<std::vector<float>> want;
        for (auto& c : chunks) want.push_back(plain_mean(reference_dp, c.grads));
        training::step_timers timers;
        training::stage_activity activity;
        training::grad_sync_options o;
        o.overlap_grad_reduce = overlap;
        o.bucket_size = 100;
        training::grad_sync sync({chunks[0].synced(), chunks[1].synced()}, o, &dp, nullptr, timers, activity);
        if (overlap != sync.overlapped()) return "overlapped() is " + std::to_string(sync.overlapped());
        if (overlap && sync.num_buckets() < 4) return "only " + std::to_string(sync.num_buckets()) + " buckets";
        // The last micro-batch's backward: chunk 1 runs last in the schedule's cooldown, events
        // from the last parameter down.
        for (int c : {1, 0})
          for (int event = static_cast<int>(layer_sizes.size()) - 1; event >= 0; --event) sync.backward_progress(c, event);
        sync.finish_grad_sync();
        for (std::size_t c = 0; c < chunks.size(); ++c) {
          // One collective over the whole buffer is the reference's own call: bitwise equal.
          // Buckets split the ring's chunks differently: equal up to float rounding.
          const auto diff = compare(chunks[c].grads, want[c], 0, overlap ? 1e-6f : 0.0f);
          if (!diff.empty()) return "chunk " + std::to_string(c) + " " + diff;
        }
        return "";
      });
      for (const auto& f : failures) FAIL_CHECK(f);
      CHECK(failures.empty());
    }
}

TEST_CASE("the distributed optimizer's shards hold the mean of their slice, and the all-gather spreads every update") {
  for (int world : {2, 3, 4})
    for (bool overlap : {false, true}) {
      INFO(world << " ranks" << (overlap ? ", overlapped parameter all-gather" : ""));
      const auto failures = comm::testing::run_on_ranks(world, [&](int rank, comm::transport& t) -> std::string {
        comm::transport_communicator dp(t, all_ranks(world), 1), reference_dp(t, all_ranks(world), 2);
        fake_chunk chunk(layer_sizes, rank, 3);
        const auto want = plain_mean(reference_dp, chunk.grads);
        training::step_timers timers;
        training::stage_activity activity;
        training::grad_sync_options o;
        o.distributed_optimizer = true;
        o.overlap_grad_reduce = o.overlap_param_gather = overlap;
        training::grad_sync sync({chunk.synced()}, o, &dp, nullptr, timers, activity);
        auto* shard = sync.shard_of(0);
        if (!shard) return "no shard";
        const std::size_t numel = chunk.values.size(), padded = (numel + world - 1) / world * world;
        if (shard->ranges.size() != 1) return std::to_string(shard->ranges.size()) + " shard ranges";
        const auto [begin, end, at] = shard->ranges[0];
        if (begin != padded / world * rank || end != std::min(numel, begin + padded / world) || at != 0)
          return "shard [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
        for (int event = static_cast<int>(layer_sizes.size()) - 1; event >= 0; --event) sync.backward_progress(0, event);
        sync.finish_grad_sync();
        const auto grads = shard->grads.host<float>();
        for (std::size_t i = begin; i < end; ++i)
          if (std::abs(grads[i - begin] - want[i]) > 1e-6f * (1 + std::abs(want[i])))
            return "shard gradient " + std::to_string(i) + ": " + std::to_string(grads[i - begin]) + " vs " +
                   std::to_string(want[i]);
        // An "optimizer step": each rank sets its slice to its own marks; the gather spreads them.
        for (std::size_t i = begin; i < end; ++i) chunk.values[i] = 1000.0f * rank + i;
        sync.start_param_sync();
        sync.wait_param_sync();
        for (std::size_t i = 0; i < numel; ++i) {
          const int owner = static_cast<int>(i / (padded / world));
          if (chunk.values[i] != 1000.0f * owner + i)
            return "value " + std::to_string(i) + " is " + std::to_string(chunk.values[i]) + " after the all-gather";
        }
        return "";
      });
      for (const auto& f : failures) FAIL_CHECK(f);
      CHECK(failures.empty());
    }
}

TEST_CASE("the tied embedding's gradient is summed between the first and last stage before the data-parallel mean") {
  // Four ranks: two pipeline stages of two replicas each; ranks r and r + 2 share an embedding.
  for (bool overlap : {false, true}) {
    INFO((overlap ? "in the embedding's bucket during the backward" : "at finish"));
    const auto failures = comm::testing::run_on_ranks(4, [&](int rank, comm::transport& t) -> std::string {
      const int stage = rank / 2, replica = rank % 2;
      comm::transport_communicator dp(t, {2 * stage, 2 * stage + 1}, 10 + static_cast<std::uint32_t>(stage));
      comm::transport_communicator embedding(t, {replica, replica + 2}, 20 + static_cast<std::uint32_t>(replica));
      auto chunk_of = [](int r) {
        fake_chunk c(layer_sizes, r, 4);
        c.params[2].tied_embedding = true;
        return c;
      };
      fake_chunk chunk = chunk_of(rank);
      training::step_timers timers;
      training::stage_activity activity;
      training::grad_sync_options o;
      o.overlap_grad_reduce = overlap;
      o.bucket_size = 1;
      training::grad_sync sync({chunk.synced()}, o, &dp, &embedding, timers, activity);
      for (int event = static_cast<int>(layer_sizes.size()) - 1; event >= 0; --event) sync.backward_progress(0, event);
      sync.finish_grad_sync();
      const auto& p = chunk.params[2];
      for (std::size_t i = 0; i < chunk.grads.size(); ++i) {
        const bool tied = i >= p.offset && i < p.offset + p.numel;
        float want = 0;
        for (int d : {0, 1}) {
          float g = chunk_of(2 * stage + d).grads[i];
          if (tied) g += chunk_of(2 * (1 - stage) + d).grads[i];
          want += 0.5f * g;
        }
        if (std::abs(chunk.grads[i] - want) > 1e-6f * (1 + std::abs(want)))
          return "gradient " + std::to_string(i) + " is " + std::to_string(chunk.grads[i]) + ", want " + std::to_string(want);
      }
      return "";
    });
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(failures.empty());
  }
}
