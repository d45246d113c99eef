// The element-wise kernels' bytes against counts written out here per kernel (a GPT layer of
// hidden 1024, MLP 4096, 16 heads, 2 x 2048 tokens, fp16, dropout 0.1, tensor-parallel 2), and
// their price in the cost model: forward + bytes / (bandwidth x memory_efficiency), the backward
// twice that, nothing without memory_efficiency.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/elementwise_traffic.hpp"
#include "simulate/simulation.hpp"
#include "simulate/system_spec.hpp"
#include "tests/simulate/minimal_system_json.hpp"

namespace sim = mactor::simulate;

namespace {

constexpr double tokens = 2 * 2048.0, hidden = 1024, ffn = 4096, heads = 16, fp16 = 2;

mactor::config::megatron_args layer_args(std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16",
                                    "--seq-length", "2048", "--max-position-embeddings", "2048", "--micro-batch-size", "2",
                                    "--global-batch-size", "8", "--vocab-size", "32000", "--fp16", "--train-iters", "1",
                                    "--lr", "1e-4", "--tensor-model-parallel-size", "2"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  const auto r = mactor::config::resolve(flags, "test", {0, 2}, [](std::string_view) { return false; });
  INFO(r.err);
  REQUIRE(!r.exit_status);
  return r.args;
}

// Two norms (read, write), two bias-dropout-adds (read two, write one, a mask byte), on the whole
// hidden state (no sequence parallelism); the activation function on this rank's half of the MLP.
double around_matmuls_by_hand(double hidden_shard, double activation_passes) {
  const double norms = 2 * tokens * hidden_shard * 2 * fp16;
  const double residuals = 2 * tokens * hidden_shard * (3 * fp16 + 1);
  return norms + residuals + tokens * ffn / 2 * activation_passes * fp16;
}

}  // namespace

TEST_CASE("a layer's element-wise bytes add up kernel by kernel") {
  const auto unfused = sim::layer_elementwise_bytes(layer_args({"--attention-backend", "unfused"}), {});
  CHECK(unfused.around_matmuls == Approx(around_matmuls_by_hand(hidden, 2)));
  // Scores of this rank's 8 heads, 2048 keys per query: Q K^T writes, softmax reads and writes,
  // dropout reads, writes and keeps a mask byte, the product with V reads.
  CHECK(unfused.attention_scores == Approx(tokens * heads / 2 * 2048 * (6 * fp16 + 1)));

  const auto flash = sim::layer_elementwise_bytes(layer_args({"--attention-backend", "flash"}), {});
  CHECK(flash.attention_scores == 0);
  CHECK(flash.around_matmuls == Approx(unfused.around_matmuls));

  const auto sequence_parallel = sim::layer_elementwise_bytes(layer_args({"--sequence-parallel"}), {});
  CHECK(sequence_parallel.around_matmuls == Approx(around_matmuls_by_hand(hidden / 2, 2)));

  // SwiGLU reads both halves of fc1's output (its MLP width given, Megatron's default being 2/3 of 4h).
  const auto gated = sim::layer_elementwise_bytes(layer_args({"--swiglu", "--ffn-hidden-size", "4096"}), {});
  CHECK(gated.around_matmuls == Approx(around_matmuls_by_hand(hidden, 3)));

  // A Mamba layer's blocks: one norm and residual, no MLP, no attention scores.
  const auto mixer_only = sim::layer_elementwise_bytes(layer_args({"--attention-backend", "unfused"}), {true, false, false});
  CHECK(mixer_only.total() == Approx(tokens * hidden * (2 * fp16 + 3 * fp16 + 1)));
}

TEST_CASE("the cost model prices element-wise bytes only where the system file gives memory_efficiency") {
  const auto args = layer_args({"--attention-backend", "unfused"});
  auto system = sim::ideal_system(1e15);
  const auto lumped = sim::simulate_config(args, system, false);
  system.memory_bandwidth_Bps = 2e12;
  system.memory_efficiency = 0.5;
  const auto apart = sim::simulate_config(args, system, false);
  const double per_layer = sim::layer_elementwise_bytes(args, {}).total() / (2e12 * 0.5);
  const auto& before = lumped.costs.chunks[0][0];
  const auto& after = apart.costs.chunks[0][0];
  CHECK(after.forward_s - before.forward_s == Approx(4 * per_layer));
  CHECK(after.backward_s - before.backward_s == Approx(2 * 4 * per_layer));
  CHECK(after.weight_grad_s == Approx(before.weight_grad_s));  // weight gradients are matmuls only

  // Under full recompute the backward runs the four layers' element-wise kernels again.
  auto recompute = layer_args({"--attention-backend", "unfused", "--recompute-granularity", "full", "--recompute-method",
                               "uniform", "--recompute-num-layers", "1"});
  const auto recomputed = sim::simulate_config(recompute, system, false).costs.chunks[0][0];
  const auto recomputed_lumped = sim::simulate_config(recompute, sim::ideal_system(1e15), false).costs.chunks[0][0];
  CHECK(recomputed.backward_s - after.backward_s ==
        Approx(recomputed_lumped.backward_s - before.backward_s + 4 * per_layer));
}

TEST_CASE("a system file's memory_efficiency is a share") {
  const std::string& file = mactor::test::minimal_system_json;
  CHECK(sim::parse_system_json(file + "}", "f.json").memory_efficiency == 0);
  CHECK(sim::parse_system_json(file + R"(, "memory_efficiency": 0.75})", "f.json").memory_efficiency == 0.75);
  CHECK_THROWS_WITH(sim::parse_system_json(file + R"(, "memory_efficiency": 1.5})", "f.json"),
                    Catch::Contains("memory_efficiency"));
}
