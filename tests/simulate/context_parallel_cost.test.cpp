// `mactor simulate` prices each --cp-comm-type's attention exchanges as mactor's runtime does them,
// checked against the alpha-beta times written out here from the shapes (H100 DGX file, one node):
// a dense GPT of 4 layers (16 heads of 64 in 8 query groups, bf16, 2 x 4096 tokens) on 8 ranks at
// cp 8; p2p hides its ring behind the attention core, a2a exposes two all-to-alls each way,
// allgather an all-gather (and its reduce-scatter), a2a+p2p both levels; compute is the same.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/context_parallel_cost.hpp"
#include "simulate/cost_model.hpp"
#include "simulate/simulation.hpp"
#include "simulate/system_spec.hpp"
#include "tests/simulate/minimal_system_json.hpp"

namespace sim = mactor::simulate;

namespace {

mactor::config::megatron_args gpt_cp8(const std::vector<std::string>& extra) {
  std::vector<std::string> flags = {
      "--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16", "--group-query-attention",
      "--num-query-groups", "8", "--seq-length", "4096", "--max-position-embeddings", "4096", "--micro-batch-size", "2",
      "--global-batch-size", "16", "--vocab-size", "32000", "--bf16", "--train-iters", "1", "--lr", "1e-4",
      "--context-parallel-size", "8"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  const auto r = mactor::config::resolve(flags, "test", {0, 8}, [](std::string_view) { return false; });
  INFO(r.err);
  REQUIRE(!r.exit_status);
  return r.args;
}

sim::system_spec h100() {
  return sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
}

// Alpha-beta on the NVLink of one node: an all-to-all of `bytes` per rank over n ranks (n - 1
// messages of 1/n), an all-gather of a `whole` buffer (n - 1 ring steps of 1/n), one transfer.
double all_to_all(const sim::system_spec& s, int n, double bytes) {
  return (n - 1) * s.intra_node.latency_s + (n - 1.0) / n * bytes / (s.intra_node.bandwidth_Bps * s.collective_efficiency);
}
double all_gather(const sim::system_spec& s, int n, double whole) {
  return (n - 1) * s.intra_node.latency_s + (n - 1.0) / n * whole / (s.intra_node.bandwidth_Bps * s.collective_efficiency);
}
double transfer(const sim::system_spec& s, double bytes) { return s.intra_node.latency_s + bytes / s.intra_node.bandwidth_Bps; }

}  // namespace

TEST_CASE("simulated context-parallel attention prices p2p, a2a, allgather and a2a+p2p from the shapes") {
  const auto system = h100();
  const double rows = 2.0 * 4096 / 8;                  // this rank's positions, both samples
  const double kv = 2 * rows * 8 * 64 * 2;             // keys and values: 8 groups of 64, bf16
  const double qkv = rows * (16 + 2 * 8) * 64 * 2;     // 16 query heads, 8 key and 8 value heads
  const double context = rows * 16 * 64 * 2;
  const double rate = system.peak_flops_bf16 * system.compute_efficiency;
  const double core = 2 * 2 * 4096.0 * 4096 * 64 * 16 / 8 / rate;  // causal: half of 4 b s^2 d heads / cp

  const auto p2p = sim::cp_attention_exchange(gpt_cp8({"--cp-comm-type", "p2p"}), system, core);
  const double ring = 7 * transfer(system, kv);
  CHECK(p2p.forward == Approx(std::max(0.0, ring - core)));
  CHECK(p2p.backward == Approx(2 * p2p.forward));
  const auto hidden = sim::cp_attention_exchange(gpt_cp8({}), system, 0);  // nothing to hide behind
  CHECK(hidden.forward == Approx(ring));

  const auto a2a = sim::cp_attention_exchange(gpt_cp8({"--cp-comm-type", "a2a"}), system, core);
  CHECK(a2a.forward == Approx(all_to_all(system, 8, qkv) + all_to_all(system, 8, context)));
  CHECK(a2a.backward == Approx(a2a.forward));

  const auto gathered = sim::cp_attention_exchange(gpt_cp8({"--cp-comm-type", "allgather"}), system, core);
  CHECK(gathered.forward == Approx(all_gather(system, 8, 8 * kv)));
  CHECK(gathered.backward == Approx(gathered.forward));

  // a2a over groups of 2 consecutive ranks, then a ring of 4 (its blocks as large as p2p's).
  const auto both = sim::cp_attention_exchange(
      gpt_cp8({"--cp-comm-type", "a2a+p2p", "--hierarchical-context-parallel-sizes", "2", "4"}), system, 0);
  const double inner = all_to_all(system, 2, qkv) + all_to_all(system, 2, context);
  CHECK(both.forward == Approx(inner + 3 * transfer(system, kv)));
  CHECK(both.backward == Approx(inner + 2 * 3 * transfer(system, kv)));

  // One type per layer: the mean of the layers'.
  const auto mixed = sim::cp_attention_exchange(gpt_cp8({"--cp-comm-type", "a2a", "a2a", "allgather", "allgather"}),
                                                system, core);
  CHECK(mixed.forward == Approx((a2a.forward + gathered.forward) / 2));
}

TEST_CASE("a ring's attention core runs at the system's ring_attention_efficiency for its chunk size") {
  auto system = h100();
  system.compute_jitter = system.sync_jitter_s = 0;
  const auto p2p_args = gpt_cp8({"--cp-comm-type", "p2p"});
  const auto one_rank_kernel = sim::simulate_config(p2p_args, system, false).costs.chunks[0][0];
  system.ring_attention_efficiency = {{128, 0.5, 0.8}, {512, 1.0, 1.0}};
  // p2p at cp 8 runs chunks of 4096 / 16 = 256 positions: halfway (in log size) from 128 to 512.
  const auto p2p = sim::cp_attention_core_overhead(p2p_args, system);
  CHECK(p2p.forward == Approx(1 / 0.75 - 1));
  CHECK(p2p.backward == Approx(1 / 0.9 - 1));
  // a2a+p2p over 2 x 4: a ring of 4, chunks of 512; a2a and allgather run the one-rank kernel.
  const auto both = sim::cp_attention_core_overhead(
      gpt_cp8({"--cp-comm-type", "a2a+p2p", "--hierarchical-context-parallel-sizes", "2", "4"}), system);
  CHECK(both.forward == Approx(0).margin(1e-12));
  CHECK(sim::cp_attention_core_overhead(gpt_cp8({"--cp-comm-type", "a2a"}), system).forward == 0);
  CHECK(sim::cp_attention_core_overhead(gpt_cp8({"--cp-comm-type", "allgather"}), system).backward == 0);
  // Outside the points: the nearest one's.
  CHECK(sim::ring_attention_efficiency_at(system, 64).forward == 0.5);
  CHECK(sim::ring_attention_efficiency_at(system, 4096).backward == 1.0);

  // Each of the 4 layers' forward core takes a third longer, its backward (twice the FLOPs) a ninth;
  // the weight gradients do not change. Causal attention: half of 4 b s^2 d heads FLOPs, / cp.
  const double rate = system.peak_flops_bf16 * system.compute_efficiency;
  const double core = 2 * 2 * 4096.0 * 4096 * 64 * 16 / 8 / rate;
  const auto ring = sim::simulate_config(p2p_args, system, false).costs.chunks[0][0];
  CHECK((ring.forward_s - ring.forward_cp_s) - (one_rank_kernel.forward_s - one_rank_kernel.forward_cp_s) ==
        Approx(4 * core / 3));
  CHECK((ring.backward_s - ring.backward_cp_s) - (one_rank_kernel.backward_s - one_rank_kernel.backward_cp_s) ==
        Approx(4 * 2 * core / 9));
  CHECK(ring.weight_grad_s == Approx(one_rank_kernel.weight_grad_s));
}

TEST_CASE("the attention core runs at the system's attention_efficiency, the rest at compute_efficiency") {
  auto system = h100();
  system.compute_jitter = system.sync_jitter_s = 0;
  const auto args = gpt_cp8({"--cp-comm-type", "a2a"});  // Ulysses: the one-rank kernel, nothing hidden
  const auto at_compute_efficiency = sim::simulate_config(args, system, false).costs.chunks[0][0];
  system.attention_efficiency_forward = 0.25;
  system.attention_efficiency_backward = 0.5;
  const auto apart = sim::simulate_config(args, system, false).costs.chunks[0][0];
  // One rank's core per layer: half of 4 b s^2 d heads FLOPs / cp forward, twice that backward.
  const double flops = 2 * 2 * 4096.0 * 4096 * 64 * 16 / 8, peak = system.peak_flops_bf16;
  const double ce = system.compute_efficiency;
  CHECK((apart.forward_s - apart.forward_cp_s) - (at_compute_efficiency.forward_s - at_compute_efficiency.forward_cp_s) ==
        Approx(4 * flops / peak * (1 / 0.25 - 1 / ce)));
  CHECK((apart.backward_s - apart.backward_cp_s) - (at_compute_efficiency.backward_s - at_compute_efficiency.backward_cp_s) ==
        Approx(4 * 2 * flops / peak * (1 / 0.5 - 1 / ce)));
  CHECK(apart.weight_grad_s == Approx(at_compute_efficiency.weight_grad_s));  // dW: the linears' GEMMs only
}

TEST_CASE("a system file's ring_attention_efficiency is an optional list of increasing chunk sizes") {
  const std::string file = mactor::test::minimal_system_json;
  CHECK(sim::parse_system_json(file + "}", "f.json").ring_attention_efficiency.empty());
  const auto s = sim::parse_system_json(
      file + R"(, "ring_attention_efficiency": [{"chunk_tokens": 64, "forward": 0.8, "backward": 0.7},
                                               {"chunk_tokens": 256, "forward": 1.1, "backward": 0.9}]})",
      "f.json");
  REQUIRE(s.ring_attention_efficiency.size() == 2);
  CHECK(s.ring_attention_efficiency[1].forward == 1.1);
  CHECK(sim::ring_attention_efficiency_at(s, 128).backward == Approx(0.8));
  CHECK_THROWS_WITH(sim::parse_system_json(file + R"(, "ring_attention_efficiency": [{"chunk_tokens": 256,
      "forward": 1, "backward": 1}, {"chunk_tokens": 64, "forward": 1, "backward": 1}]})", "f.json"),
                    Catch::Contains("chunk_tokens must increase"));
  CHECK_THROWS_WITH(sim::parse_system_json(file + R"(, "ring_attention_efficiency": [{"chunk_tokens": 64,
      "forward": 0, "backward": 1}]})", "f.json"),
                    Catch::Contains("'forward' must be positive"));
  CHECK_THROWS_WITH(sim::parse_system_json(file + R"(, "ring_attention_efficiency": {}})", "f.json"),
                    Catch::Contains("non-empty list"));
  // attention_efficiency: shares of the peak, forward and backward.
  const auto a = sim::parse_system_json(file + R"(, "attention_efficiency": {"forward": 0.1, "backward": 0.2}})", "f.json");
  CHECK(a.attention_efficiency_forward == 0.1);
  CHECK(a.attention_efficiency_backward == 0.2);
  CHECK(sim::parse_system_json(file + "}", "f.json").attention_efficiency_forward == 0);
  CHECK_THROWS_WITH(sim::parse_system_json(file + R"(, "attention_efficiency": {"forward": 1.5, "backward": 0.2}})", "f.json"),
                    Catch::Contains("at most 1"));
  CHECK_THROWS_WITH(sim::parse_system_json(file + R"(, "attention_efficiency": {"forward": 0.5}})", "f.json"),
                    Catch::Contains("'backward' is missing"));
}

TEST_CASE("a simulated a2a layout runs the same compute as p2p's and exposes its all-to-alls") {
  const auto system = h100();
  const auto p2p = sim::simulate_config(gpt_cp8({"--cp-comm-type", "p2p"}), system, false);
  const auto a2a = sim::simulate_config(gpt_cp8({"--cp-comm-type", "a2a"}), system, false);
  const auto& c = p2p.costs.chunks[0][0];
  const auto& u = a2a.costs.chunks[0][0];
  CHECK(c.forward_s - c.forward_cp_s == Approx(u.forward_s - u.forward_cp_s));
  CHECK(c.backward_s - c.backward_cp_s == Approx(u.backward_s - u.backward_cp_s));
  CHECK(u.forward_cp_s > c.forward_cp_s);
  // Every microbatch's forward and backward exchange is on the iteration's clock (8 microbatches).
  CHECK(a2a.iteration.ranks[0].pipeline.exposed_cp_s == Approx(8 * (u.forward_cp_s + u.backward_cp_s)));
  CHECK(p2p.iteration.ranks[0].pipeline.exposed_cp_s == Approx(8 * (c.forward_cp_s + c.backward_cp_s)));
}
