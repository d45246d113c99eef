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
