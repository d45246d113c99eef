// The cost model against formulas written out here by hand: Megatron's FLOPs for a plain GPT
// (B s (72 l h^2 + 6 l h s + 6 h V), what --log-throughput counts with causal attention at half),
// the parameter count and bytes per parameter of Megatron's theoretical_memory_usage.py, and the
// ring collectives' alpha-beta times.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/collectives.hpp"
#include "simulate/simulation.hpp"

namespace sim = mactor::simulate;

namespace {

constexpr double h = 1024, l = 8, s = 512, V = 50304;  // 50257 padded to a multiple of 128 (tp 1)

mactor::config::megatron_args gpt_args(std::vector<std::string> layout, int world) {
  std::vector<std::string> flags = {"--num-layers", "8", "--hidden-size", "1024", "--num-attention-heads", "16",
                                    "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
                                    "--global-batch-size", "16", "--vocab-size", "50257", "--bf16", "--train-iters", "1",
                                    "--lr", "1e-4"};
  flags.insert(flags.end(), layout.begin(), layout.end());
  const auto r = mactor::config::resolve(flags, "test", {0, world}, [](std::string_view) { return false; });
  INFO(r.err);
  REQUIRE(!r.exit_status);
  return r.args;
}

}  // namespace

TEST_CASE("simulated compute adds up to Megatron's model FLOPs at the peak rate") {
  const double peak = 1e15;
  for (auto layout : std::vector<std::vector<std::string>>{
           {}, {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"},
           {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "2"}}) {
    const auto args = gpt_args(layout, 8);
    const auto result = sim::simulate_config(args, sim::ideal_system(peak), false);
    // Megatron pads the vocabulary to a multiple of 128 x tp.
    const double multiple = 128.0 * static_cast<double>(args.distributed.tensor_model_parallel_size);
    const double padded = std::ceil(50257 / multiple) * multiple;
    const double by_hand = 16 * s * (72 * l * h * h + 6 * l * h * s + 6 * h * padded);
    CHECK(result.costs.model_flops_per_iteration == Approx(by_hand).epsilon(1e-12));
    double busy = 0;
    for (const auto& r : result.iteration.ranks) busy += r.pipeline.busy_s;
    const double replicas = static_cast<double>(args.derived.data_parallel_size * args.distributed.tensor_model_parallel_size);
    CHECK(busy * replicas * peak == Approx(by_hand).epsilon(1e-9));
    CHECK(result.model_tflops_per_gpu * 1e12 / peak == Approx(result.mfu));
  }
}

TEST_CASE("full recompute adds one forward to every backward") {
  const auto args = gpt_args({"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"}, 1);
  const auto base = sim::simulate_config(gpt_args({}, 1), sim::ideal_system(1e15), false);
  const auto recomputed = sim::simulate_config(args, sim::ideal_system(1e15), false);
  const auto& c0 = base.costs.chunks[0][0];
  const auto& c1 = recomputed.costs.chunks[0][0];
  const double layer_forward = 2 * 512 * (24 * h * h + 2 * h * s) / 1e15;  // per microbatch of 2 sequences
  CHECK(c1.backward_s - c0.backward_s == Approx(l * layer_forward));
  CHECK(c1.activation_bytes < c0.activation_bytes / 10);
}

TEST_CASE("weights and gradients and optimizer state follow Megatron's 18 and 6 + 12/dp bytes per parameter") {
  const double params = l * (12 * h * h + 4 * h) + 2 * h + h * V;  // tied embedding, Megatron's count
  const auto plain = sim::simulate_config(gpt_args({}, 4), sim::ideal_system(1e15), false);
  const auto& m = plain.memory[0];
  CHECK(m.parameters + m.gradients + m.optimizer == Approx(18 * params));
  const auto sharded = sim::simulate_config(gpt_args({"--use-distributed-optimizer"}, 4), sim::ideal_system(1e15), false);
  const auto& d = sharded.memory[0];
  CHECK(d.parameters + d.gradients + d.optimizer == Approx((6 + 12.0 / 4) * params));
}

TEST_CASE("ring collectives take the alpha-beta time of the link their group crosses") {
  sim::system_spec sys = sim::ideal_system(1e15, 8);
  sys.intra_node = {2e-6, 100e9};
  sys.inter_node = {5e-6, 10e9};
  sys.collective_efficiency = 0.5;
  const double bytes = 1e9;
  CHECK(sim::all_reduce_seconds(sys, {8, 1}, bytes) == Approx(14 * 2e-6 + 2 * 7.0 / 8 * bytes / 50e9));
  CHECK(sim::all_gather_seconds(sys, {4, 2}, bytes) == Approx(3 * 2e-6 + 3.0 / 4 * bytes / 50e9));
  CHECK(sim::all_reduce_seconds(sys, {4, 8}, bytes) == Approx(6 * 5e-6 + 2 * 3.0 / 4 * bytes / 5e9));
  CHECK(sim::all_reduce_seconds(sys, {1, 1}, bytes) == 0);
}

TEST_CASE("a system file names the field it lacks") {
  CHECK_THROWS_WITH(sim::parse_system_json(R"({"name": "x"})", "f.json"), Catch::Contains("peak_tflops_bf16"));
  CHECK_THROWS_WITH(sim::parse_system_json("{", "f.json"), Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(sim::read_system_file("/nonexistent/system.json"), Catch::Contains("--system"));
}

TEST_CASE("every shipped system file parses") {
  for (const char* name : {"a100_80gb_dgx.json", "h100_sxm_dgx.json", "h200_dgx.json", "cpu_this_machine.json"}) {
    const auto sys = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/" + name);
    CHECK(sys.peak_flops_bf16 > 0);
    CHECK(sys.accelerators_per_node >= 1);
  }
}
