// A hybrid Mamba model under context parallelism against what is written out here: each rank
// runs 1/cp of the model's compute (the Mamba scan over the whole sequence for heads / cp heads
// is the same work / cp), plus per Mamba layer and direction five all-to-alls over the
// context-parallel group (x, B, C, dt to heads, y back, as mactor's mixer moves them) whose bytes
// are counted here from the shapes, plus the attention layers' ring exchange as for dense CP;
// activations / cp; the report names the exposed CP time; what is not modelled is still refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/cost_model.hpp"
#include "simulate/hybrid_layers.hpp"
#include "simulate/simulation.hpp"
#include "simulate/simulation_report.hpp"
#include "simulate/system_spec.hpp"

namespace sim = mactor::simulate;

namespace {

// 8 layers M*M-M*M-: 4 Mamba (16 heads of 64, 8 groups of state 128), 2 attention-only (8 heads
// of 64), 2 MLP-only; a microbatch of 2 x 256 tokens in bf16.
const std::vector<std::string> hybrid = {
    "--num-layers", "8", "--hidden-size", "512", "--num-attention-heads", "8", "--seq-length", "256",
    "--max-position-embeddings", "256", "--micro-batch-size", "2", "--global-batch-size", "32", "--vocab-size", "32000",
    "--bf16", "--train-iters", "1", "--lr", "1e-4", "--swiglu", "--disable-bias-linear", "--ffn-hidden-size", "1024",
    "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--is-hybrid-model",
    "--hybrid-override-pattern", "M*M-M*M-"};

mactor::config::megatron_args args_of(const std::vector<std::string>& extra, int world) {
  std::vector<std::string> flags = hybrid;
  flags.insert(flags.end(), extra.begin(), extra.end());
  const auto r = mactor::config::resolve(flags, "test", {0, world}, [](std::string_view) { return false; });
  INFO(r.err);
  REQUIRE(!r.exit_status);
  return r.args;
}

mactor::config::megatron_args with_cp(int cp, std::vector<std::string> extra = {}) {
  extra.insert(extra.end(), {"--context-parallel-size", std::to_string(cp)});
  return args_of(extra, cp);
}

sim::system_spec h100() {
  return sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
}

// One all-to-all of `bytes` per rank over cp ranks in one node: cp - 1 peers, 1/cp of it to each.
double nvlink_all_to_all(const sim::system_spec& s, int cp, double bytes) {
  const auto& link = s.intra_node;
  return (cp - 1) * link.latency_s + (cp - 1.0) / cp * bytes / (link.bandwidth_Bps * s.collective_efficiency);
}

}  // namespace

TEST_CASE("a hybrid model's Mamba exchange under CP moves x, B, C, dt to heads and y back, counted from the shapes") {
  for (const int cp : {2, 4}) {
    INFO("cp " << cp);
    // Each rank's 2 x 256 / cp positions in bf16; x and y 16 heads x 64, B and C 8 groups x 128
    // (8 groups >= cp: each on one rank), dt one per head.
    const double rows = 2.0 * 256 / cp * 2;
    const std::vector<double> expected = {rows * 1024, rows * 1024, rows * 1024, rows * 16, rows * 1024};
    const auto bytes = sim::mamba_context_parallel_exchange_bytes(with_cp(cp));
    REQUIRE(bytes.size() == expected.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) CHECK(bytes[i] == Approx(expected[i]));
  }
  // TP2 CP4 with 4 groups: each tensor-parallel rank holds 8 heads and 2 groups, fewer groups
  // than cp, so each group's B and C go to the 2 ranks holding its heads.
  const auto a = args_of({"--tensor-model-parallel-size", "2", "--context-parallel-size", "4", "--mamba-num-groups", "4"}, 8);
  const double rows = 2.0 * 256 / 4 * 2;
  const auto bytes = sim::mamba_context_parallel_exchange_bytes(a);
  REQUIRE(bytes.size() == 5);
  CHECK(bytes[0] == Approx(rows * 512));          // x: 8 heads x 64
  CHECK(bytes[1] == Approx(rows * 2 * 2 * 128));  // B: 2 groups, each twice
  CHECK(bytes[2] == Approx(bytes[1]));
  CHECK(bytes[3] == Approx(rows * 8));            // dt
  CHECK(bytes[4] == Approx(bytes[0]));            // y
  CHECK(sim::mamba_context_parallel_exchange_bytes(args_of({}, 1)).empty());
}

TEST_CASE("a hybrid model under CP runs 1/cp of CP1's compute per rank plus the Mamba all-to-alls and the attention ring") {
  const auto system = h100();
  const auto one = sim::simulate_config(args_of({}, 1), system, false);
  const auto& c1 = one.costs.chunks[0][0];
  const double rate = system.peak_flops_bf16 * system.compute_efficiency;
  for (const int cp : {2, 4}) {
    INFO("cp " << cp);
    const auto result = sim::simulate_config(with_cp(cp), system, false);
    const auto& c = result.costs.chunks[0][0];
    // Compute: the same FLOPs over cp ranks (tp 1: no tensor-parallel collectives).
    CHECK(c.forward_s - c.forward_cp_s == Approx(c1.forward_s / cp));
    CHECK(c.backward_s - c.backward_cp_s == Approx(c1.backward_s / cp));
    CHECK(c.weight_grad_s == Approx(c1.weight_grad_s / cp));
    // The exchanges: per Mamba layer five all-to-alls each way (bytes as in the test above); per
    // attention layer cp - 1 ring steps of the local K and V (8 heads x 64, bf16) beyond the
    // attention core (2 b s^2 x 64 x 8 / cp FLOPs), twice in the backward; none in MLP layers.
    const double rows = 2.0 * 256 / cp * 2;
    double mamba = 0;
    for (const double columns : {1024, 1024, 1024, 16, 1024}) mamba += nvlink_all_to_all(system, cp, rows * columns);
    const double kv = 2 * 2 * (256.0 / cp) * 8 * 64 * 2;
    const double core = 2 * 2 * 256.0 * 256 * 64 * 8 / cp / rate;
    const double ring = (cp - 1) * (system.intra_node.latency_s + kv / system.intra_node.bandwidth_Bps) - core;
    CHECK(ring > 0);
    CHECK(c.forward_cp_s == Approx(4 * mamba + 2 * ring));
    CHECK(c.backward_cp_s == Approx(4 * mamba + 2 * 2 * ring));
    // The iteration, dp 1 in both: each rank busy for 1/cp of CP1's time plus the exchanges.
    const auto& r = result.iteration.ranks[0].pipeline;
    const double microbatches = result.shape.num_microbatches;
    CHECK(microbatches == one.shape.num_microbatches);
    CHECK(r.exposed_cp_s == Approx(microbatches * (c.forward_cp_s + c.backward_cp_s)));
    CHECK(r.busy_s == Approx(one.iteration.ranks[0].pipeline.busy_s / cp + r.exposed_cp_s));
    // Activations: each rank keeps its positions' share.
    CHECK(c.activation_bytes == Approx(c1.activation_bytes / cp));
    CHECK(c.backward_transient_bytes == Approx(c1.backward_transient_bytes / cp));
    CHECK(sim::mamba_activation_bytes(with_cp(cp)) == Approx(sim::mamba_activation_bytes(args_of({}, 1)) / cp));
  }
}

TEST_CASE("a hybrid model's exposed CP time is named in the per-group line and the rank table") {
  const auto result = sim::simulate_config(with_cp(4, {"--seq-length", "4096", "--max-position-embeddings", "4096"}), h100(),
                                           false);
  const double exposed = result.iteration.ranks[0].pipeline.exposed_cp_s;
  CHECK(exposed > 0);
  const std::string text = sim::report_text(result);
  INFO(text);
  const auto at = text.find("| CP ");
  REQUIRE(at != std::string::npos);
  double printed_ms = 0;
  REQUIRE(std::sscanf(text.c_str() + at, "| CP %lf", &printed_ms) == 1);
  CHECK(printed_ms == Approx(exposed * 1e3).margin(0.05));
  CHECK(printed_ms > 0);
  // The rank table's "exposed TP/CP/PP/DP ms" column: rank 0's row, the second of the four.
  const auto row = text.find("\n   0 |");
  REQUIRE(row != std::string::npos);
  double tp_ms = -1, cp_ms = -1;
  REQUIRE(std::sscanf(text.c_str() + row, "\n   0 | %*d | %*f | %*f | %lf/%lf", &tp_ms, &cp_ms) == 2);
  CHECK(tp_ms == 0);
  CHECK(cp_ms == Approx(printed_ms).margin(0.05));
  CHECK(text.find("the Mamba layers' context-parallel all-to-alls") != std::string::npos);
}

TEST_CASE("a hybrid model with CP is simulated, and with MoE, MLA, MTP, virtual stages, an uneven split or odd heads refused") {
  CHECK(sim::unsupported_flags(with_cp(2)).empty());
  CHECK(sim::unsupported_flags(args_of({"--tensor-model-parallel-size", "2", "--sequence-parallel",
                                        "--context-parallel-size", "2", "--pipeline-model-parallel-size", "2"}, 8))
            .empty());
  struct refusal {
    std::vector<std::string> flags;
    int world;
    std::string message;
  };
  const std::string cp2[] = {"--context-parallel-size", "2"};
  for (const auto& r : std::vector<refusal>{
           {{"--num-experts", "4", "--moe-router-topk", "2"}, 2, "--num-experts with a hybrid model"},
           {{"--multi-latent-attention"}, 2, "--multi-latent-attention with a hybrid model"},
           {{"--mtp-num-layers", "1"}, 2, "--mtp-num-layers with a hybrid model"},
           {{"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "2"}, 4,
            "virtual pipeline stages with a hybrid model"},
           {{"--pipeline-model-parallel-size", "2", "--decoder-first-pipeline-num-layers", "2"}, 4,
            "an uneven pipeline split with a hybrid model"}}) {
    std::vector<std::string> flags = r.flags;
    flags.insert(flags.end(), std::begin(cp2), std::end(cp2));
    const auto refused = sim::unsupported_flags(args_of(flags, r.world));
    INFO(r.message);
    REQUIRE(refused.size() == 1);
    CHECK(refused.front().find(r.message + " is not modelled") != std::string::npos);
  }
  // Megatron's MambaContextParallel asserts: 16 heads do not split over 32 ranks; 24 heads do
  // over 4, but 6 groups neither divide 4 nor divide by it.
  const auto heads = sim::unsupported_flags(with_cp(32, {"--seq-length", "1024", "--max-position-embeddings", "1024"}));
  REQUIRE(heads.size() == 1);
  CHECK(heads.front().find("nheads must be evenly divisible by tp_size * cp_size") != std::string::npos);
  const auto groups = sim::unsupported_flags(with_cp(4, {"--mamba-num-heads", "24", "--mamba-num-groups", "6"}));
  REQUIRE(groups.size() == 1);
  CHECK(groups.front().find("ngroups must be evenly divisible by tp_size * cp_size") != std::string::npos);
}
