// The simulator's FSDP against the ring formulas and byte counts written out here: ZeRO-3 gathers
// a chunk's bf16 weights before every forward and backward and reduce-scatters its fp32 gradients
// after every backward; ZeRO-2 only the latter, keeping the distributed optimizer's parameter
// all-gather; FSDP2 without resharding gathers once per step; and each strategy keeps a 1/dp share
// of what it shards.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/simulation.hpp"
#include "simulate/system_spec.hpp"

namespace sim = mactor::simulate;

namespace {

mactor::config::megatron_args args_of(std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16",
                                    "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "1",
                                    "--global-batch-size", "32", "--vocab-size", "32000", "--bf16", "--train-iters", "1",
                                    "--lr", "1e-4"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  const auto r = mactor::config::resolve(flags, "test", {0, 8}, [](std::string_view) { return false; });
  INFO(r.err);
  REQUIRE(!r.exit_status);
  return r.args;
}

const std::vector<std::string> zero1 = {"--use-distributed-optimizer"};
const std::vector<std::string> zero3 = {"--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params",
                                        "--ckpt-format", "fsdp_dtensor"};
const std::vector<std::string> zero2 = {"--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads",
                                        "--ckpt-format", "fsdp_dtensor"};

// A ring all-gather (or reduce-scatter) of a `bytes` buffer over the 8 ranks of one DGX node.
double ring_8(const sim::system_spec& s, double bytes) {
  return 7 * s.intra_node.latency_s + 7.0 / 8 * bytes / (s.intra_node.bandwidth_Bps * s.collective_efficiency);
}

}  // namespace

TEST_CASE("simulated FSDP moves each chunk's weights and gradients around every forward and backward") {
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
  const auto optim = sim::simulate_config(args_of(zero1), system, false);
  const auto z3 = sim::simulate_config(args_of(zero3), system, false);
  const auto z2 = sim::simulate_config(args_of(zero2), system, false);
  const auto no_reshard = sim::simulate_config(
      args_of({"--use-torch-fsdp2", "--torch-fsdp2-no-reshard-after-forward", "--no-gradient-accumulation-fusion",
               "--untie-embeddings-and-output-weights"}),
      system, false);
  const auto& base = optim.costs.chunks[0][0];
  const double params = base.parameters;
  const double gather = ring_8(system, params * 2), scatter = ring_8(system, params * 4);
  const double microbatches = 32 / 8;

  const auto& c3 = z3.costs.chunks[0][0];
  CHECK(c3.forward_fsdp_s == Approx(gather).epsilon(1e-12));
  CHECK(c3.backward_fsdp_s == Approx(gather + scatter).epsilon(1e-12));
  CHECK(c3.forward_s == Approx(base.forward_s + gather).epsilon(1e-12));
  CHECK(c3.dp_sync_s == 0);
  CHECK(c3.param_gather_s == 0);
  CHECK(z3.iteration.ranks[0].pipeline.exposed_fsdp_s == Approx(microbatches * (2 * gather + scatter)));

  const auto& c2 = z2.costs.chunks[0][0];
  CHECK(c2.forward_fsdp_s == 0);
  CHECK(c2.backward_fsdp_s == Approx(scatter).epsilon(1e-12));
  CHECK(c2.dp_sync_s == 0);
  CHECK(c2.param_gather_s == Approx(base.param_gather_s));  // as the distributed optimizer's
  CHECK(base.dp_sync_s == Approx(scatter).epsilon(1e-12));  // ZeRO-1 reduce-scatters once per step

  const auto& cn = no_reshard.costs.chunks[0][0];  // untied: its own parameter count
  CHECK(cn.forward_fsdp_s == Approx(ring_8(system, cn.parameters * 2) / microbatches).epsilon(1e-12));
  CHECK(cn.backward_fsdp_s == Approx(ring_8(system, cn.parameters * 4)).epsilon(1e-12));

  // Memory: ZeRO-1 shards the optimizer state, ZeRO-2 also the gradients, ZeRO-3 also the weights.
  const auto& m1 = optim.memory[0];
  CHECK(z2.memory[0].optimizer == Approx(m1.optimizer));
  CHECK(z2.memory[0].gradients == Approx(m1.gradients / 8));
  CHECK(z2.memory[0].parameters == Approx(m1.parameters));
  CHECK(z3.memory[0].gradients == Approx(m1.gradients / 8));
  CHECK(z3.memory[0].parameters == Approx(m1.parameters / 8));
  CHECK(m1.parameters == Approx(params * 2));
  // The whole chunk's bf16 weights and fp32 gradients are held while its backward runs.
  CHECK(c3.backward_transient_bytes - base.backward_transient_bytes == Approx(params * (2 + 4)));
}

TEST_CASE("FSDP's transfers hide behind the chunk's compute with the overlap flags") {
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
  const auto exposed = sim::simulate_config(args_of(zero3), system, false);
  auto flags = zero3;
  flags.insert(flags.end(), {"--overlap-grad-reduce", "--overlap-param-gather"});
  const auto hidden = sim::simulate_config(args_of(flags), system, false);
  const auto& e = exposed.costs.chunks[0][0];
  const auto& h = hidden.costs.chunks[0][0];
  const double compute_forward = e.forward_s - e.forward_fsdp_s;
  CHECK(h.forward_fsdp_s == Approx(std::max(0.0, e.forward_fsdp_s - compute_forward)));
  CHECK(h.forward_fsdp_s < e.forward_fsdp_s);
  CHECK(hidden.iteration.iteration_s < exposed.iteration.iteration_s);
}

TEST_CASE("simulated FSDP shards a MoE model's experts over the expert-data-parallel group") {
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
  const std::vector<std::string> moe = {"--num-experts", "8", "--expert-model-parallel-size", "4", "--moe-router-topk", "2"};
  const auto with = [&](std::vector<std::string> strategy) {
    strategy.insert(strategy.end(), moe.begin(), moe.end());
    return sim::simulate_config(args_of(strategy), system, false);
  };
  const auto z2 = with(zero2), z3 = with(zero3);
  const auto& c2 = z2.costs.chunks[0][0];
  const double experts = c2.expert_parameters, dense = c2.parameters - experts;
  REQUIRE(experts > 0);
  // Two expert-data-parallel replicas (8 ranks / ep 4), 4 ranks apart in one node: one ring step.
  const auto ring_2 = [&](double bytes) {
    return system.intra_node.latency_s + bytes / 2 / (system.intra_node.bandwidth_Bps * system.collective_efficiency);
  };
  CHECK(c2.backward_fsdp_s == Approx(ring_8(system, dense * 4) + ring_2(experts * 4)).epsilon(1e-12));
  CHECK(c2.forward_fsdp_s == 0);
  const auto& c3 = z3.costs.chunks[0][0];
  CHECK(c3.forward_fsdp_s == Approx(ring_8(system, dense * 2) + ring_2(experts * 2)).epsilon(1e-12));
  CHECK(c3.backward_fsdp_s ==
        Approx(ring_8(system, dense * 2) + ring_2(experts * 2) + ring_8(system, dense * 4) + ring_2(experts * 4)).epsilon(1e-12));
}
