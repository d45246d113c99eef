// The distributed optimizer's parameter all-gather with fp8 weights (--fp8-param-gather) on 2
// and 3 in-process ranks: every rank ends with every other rank's updated bf16 values and fp8
// bytes, and the bytes that travel are 2 per bf16 element and 1 per fp8 one (counted here from
// the shard boundaries), padded to the largest member's payload. The bf16 values buffer holds
// no fp8 weight: the other parameters packed in flat order, as the store keeps them.
#include "training/grad_sync.hpp"

#include <catch2/catch.hpp>

#include "comm/collectives.hpp"
#include "tests/comm/in_process_ranks.hpp"

using namespace mactor;

namespace {

const std::vector<std::size_t> sizes{7, 130, 33, 1, 64, 250};
const std::vector<bool> is_fp8{false, true, false, false, true, true};

std::uint16_t value_mark(int rank, std::size_t i) { return static_cast<std::uint16_t>(1000 * (rank + 1) + i); }
std::uint8_t byte_mark(int rank, std::size_t i) { return static_cast<std::uint8_t>(37 * rank + i); }

}  // namespace

TEST_CASE("the parameter all-gather moves one byte per fp8 weight element and two per bf16 one") {
  for (int world : {2, 3}) {
    INFO(world << " ranks");
    const auto failures = comm::testing::run_on_ranks(world, [&](int rank, comm::transport& t) -> std::string {
      std::vector<int> members(world);
      for (int r = 0; r < world; ++r) members[r] = r;
      comm::transport_communicator dp(t, members, 1);
      std::vector<training::synced_param> params;
      std::vector<training::fp8_weight_place> fp8;
      std::size_t numel = 0, fp8_bytes = 0;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        params.push_back({numel, sizes[k], static_cast<int>(k), false});
        if (is_fp8[k]) fp8.push_back({numel, sizes[k], fp8_bytes}), fp8_bytes += sizes[k];
        numel += sizes[k];
      }
      std::vector<std::uint16_t> values(numel - fp8_bytes, 0), unused(numel, 0);
      std::vector<float> grads(numel, 0.0f);
      std::vector<std::uint8_t> bytes(fp8_bytes, 0);
      training::step_timers timers;
      training::stage_activity activity;
      training::grad_sync_options o;
      o.distributed_optimizer = true;
      training::synced_chunk chunk{{unused.data(), {std::int64_t(numel)}, tensor::dtype::bfloat16},
                                   tensor::view_of(std::span<float>(grads)), params};
      training::grad_sync sync({chunk}, o, &dp, nullptr, timers, activity);
      sync.gather_fp8(0, {values.data(), {std::int64_t(values.size())}, tensor::dtype::bfloat16}, bytes.data(), fp8);
      const auto* shard = sync.shard_of(0);
      const std::size_t w = std::size_t(world), padded = (numel + w - 1) / w * w, per = padded / w;
      const std::size_t shard_begin = per * std::size_t(rank), shard_end = shard_begin + per;
      if (shard->ranges.size() != 1 || shard->ranges[0].begin != std::min(shard_begin, numel))
        return std::string("unexpected shard ranges");
      // Where element i lives: its fp8 byte index, or none.
      auto fp8_index = [&](std::size_t i) -> std::ptrdiff_t {
        for (const auto& w : fp8)
          if (i >= w.offset && i < w.offset + w.numel) return std::ptrdiff_t(w.byte_offset + i - w.offset);
        return -1;
      };
      // Where a model value's element i lives: past the parameters before it that are not fp8.
      auto value_index = [&](std::size_t i) {
        std::size_t at = 0, start = 0;
        for (std::size_t k = 0; k < sizes.size(); start += sizes[k], ++k)
          if (i >= start && i < start + sizes[k]) return at + (i - start);
          else if (!is_fp8[k]) at += sizes[k];
        return std::size_t(-1);
      };
      // An "optimizer step" on this rank's shard, then the gather.
      for (std::size_t i = shard_begin; i < std::min(shard_end, numel); ++i) {
        if (const auto b = fp8_index(i); b >= 0) bytes[std::size_t(b)] = byte_mark(rank, i);
        else values[value_index(i)] = value_mark(rank, i);
      }
      sync.start_param_sync();
      sync.wait_param_sync();
      std::size_t largest = 0;
      for (int m = 0; m < world; ++m) {
        std::size_t payload = 0;
        for (std::size_t i = per * m; i < std::min(per * (m + 1), numel); ++i) {
          const auto b = fp8_index(i);
          payload += b >= 0 ? 1 : 2;
          if (b >= 0 ? bytes[std::size_t(b)] != byte_mark(m, i) : values[value_index(i)] != value_mark(m, i))
            return "element " + std::to_string(i) + " does not hold member " + std::to_string(m) + "'s update";
        }
        largest = std::max(largest, payload);
      }
      const std::size_t moved = sync.take_param_gather_bytes();
      if (moved != largest * world) return "moved " + std::to_string(moved) + " bytes, expected " + std::to_string(largest * world);
      // Against gathering the shard as bf16: most elements (444 of 485) are fp8 and travel in half.
      if (moved * 100 >= per * world * 2 * 65) return "moved " + std::to_string(moved) + " bytes, not ~half of bf16";
      return "";
    });
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(failures.empty());
  }
}
