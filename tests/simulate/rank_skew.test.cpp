// Waiting for the slowest rank: E[max of n standard normals] against its closed forms (n = 2, 3)
// and a Monte Carlo draw (n = 16), and the cost model's use of it against counts by hand: a
// tensor-parallel layer waits E[max of 2] x jitter x its compute in the forward (twice in the
// backward), the data-parallel replicas E[max of dp] x jitter x a step's compute at the sync; and
// the waits that do not scale with the compute: E[max of n] x sync_jitter at each collective or
// ring step, counted by hand for TP2 with and without sequence parallelism and for CP2's ring.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/rank_skew.hpp"
#include "simulate/simulation.hpp"
#include "simulate/system_spec.hpp"
#include "tests/simulate/minimal_system_json.hpp"

namespace sim = mactor::simulate;

namespace {

const double pi = std::acos(-1.0);

mactor::config::megatron_args args_of(int world, std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16",
                                    "--seq-length", "2048", "--max-position-embeddings", "2048", "--micro-batch-size", "1",
                                    "--global-batch-size", "8", "--vocab-size", "32000", "--train-iters", "1", "--lr", "1e-4"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  const auto r = mactor::config::resolve(flags, "test", {0, world}, [](std::string_view) { return false; });
  INFO(r.err);
  REQUIRE(!r.exit_status);
  return r.args;
}

}  // namespace

TEST_CASE("the expected maximum of n standard normals matches closed forms and a Monte Carlo draw") {
  CHECK(sim::expected_max_of_normals(1) == 0);
  CHECK(sim::expected_max_of_normals(2) == Approx(1 / std::sqrt(pi)).epsilon(1e-6));
  CHECK(sim::expected_max_of_normals(3) == Approx(3 / (2 * std::sqrt(pi))).epsilon(1e-6));
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal;
  double sum = 0;
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) {
    double m = -1e9;
    for (int k = 0; k < 16; ++k) m = std::max(m, normal(gen));
    sum += m;
  }
  CHECK(sim::expected_max_of_normals(16) == Approx(sum / draws).margin(0.01));  // the draw's error: ~0.0013
  CHECK(sim::expected_max_of_normals(16384) > sim::expected_max_of_normals(16));
}

TEST_CASE("a tensor-parallel layer waits for the slower rank in proportion to its compute") {
  const auto args = args_of(2, {"--tensor-model-parallel-size", "2"});
  auto system = sim::ideal_system(1e15);
  const auto lockstep = sim::simulate_config(args, system, false).costs.chunks[0][0];
  system.compute_jitter = 0.03;
  const auto jittered = sim::simulate_config(args, system, false).costs.chunks[0][0];
  // One layer's forward on one of two ranks: 24 s h^2 + 2 s^2 h FLOPs (Megatron's formula, the
  // causal scores counted half), halved.
  const double s = 2048, h = 1024, layer_s = (24 * s * h * h + 2 * s * s * h) / 2 / 1e15;
  const double wait = 4 * sim::expected_max_of_normals(2) * 0.03 * layer_s;
  CHECK(jittered.forward_s - lockstep.forward_s == Approx(wait));
  CHECK(jittered.backward_s - lockstep.backward_s == Approx(2 * wait));
  CHECK(jittered.forward_tp_s - lockstep.forward_tp_s == Approx(wait));  // reported as TP time
  CHECK(jittered.weight_grad_s == Approx(lockstep.weight_grad_s));
}

TEST_CASE("data-parallel replicas wait for the slowest at the gradient sync, after a step's compute") {
  auto system = sim::ideal_system(1e15);
  system.compute_jitter = 0.05;
  for (int dp : {2, 8}) {
    const auto args = args_of(dp, {});
    const int microbatches = 8 / dp;
    const auto chunk = sim::simulate_config(args, system, false).costs.chunks[0][0];
    const double step = microbatches * (chunk.forward_s + chunk.backward_s);  // no exposed collective on an ideal machine
    CHECK(chunk.dp_sync_s == Approx(sim::expected_max_of_normals(dp) * 0.05 * step));
  }
  // One replica waits for no one.
  CHECK(sim::simulate_config(args_of(1, {}), system, false).costs.chunks[0][0].dp_sync_s == 0);
}

TEST_CASE("each collective and ring step waits E[max of its group] x sync_jitter whatever the compute") {
  auto system = sim::ideal_system(1e15);
  const double per_sync = sim::expected_max_of_normals(2) * 300e-6;
  struct layout {
    std::vector<std::string> flags;
    double forward_syncs, backward_syncs;  // per layer, by hand
    bool cp;
  };
  // TP2: the attention's and the MLP's all-reduce each way; with sequence parallelism an
  // all-gather and a reduce-scatter for each; CP2's ring: one step forward, two backward.
  const std::vector<layout> layouts = {
      {{"--tensor-model-parallel-size", "2"}, 2, 2, false},
      {{"--tensor-model-parallel-size", "2", "--sequence-parallel"}, 4, 4, false},
      {{"--context-parallel-size", "2"}, 1, 2, true},
  };
  for (const auto& l : layouts) {
    INFO(l.flags[0] << (l.flags.size() > 2 ? " with sequence parallelism" : ""));
    const auto args = args_of(2, l.flags);
    system.sync_jitter_s = 0;
    const auto lockstep = sim::simulate_config(args, system, false).costs.chunks[0][0];
    system.sync_jitter_s = 300e-6;
    const auto waiting = sim::simulate_config(args, system, false).costs.chunks[0][0];
    CHECK(waiting.forward_s - lockstep.forward_s == Approx(4 * l.forward_syncs * per_sync));
    CHECK(waiting.backward_s - lockstep.backward_s == Approx(4 * l.backward_syncs * per_sync));
    const double exposed_forward = l.cp ? waiting.forward_cp_s - lockstep.forward_cp_s
                                        : waiting.forward_tp_s - lockstep.forward_tp_s;
    CHECK(exposed_forward == Approx(4 * l.forward_syncs * per_sync));  // reported as the group's time
  }
  // A group of one never waits.
  CHECK(sim::synchronization_wait_seconds(system, 1, 8) == 0);
}

TEST_CASE("a system file's sync_jitter_us is optional and positive") {
  const std::string& file = mactor::test::minimal_system_json;
  CHECK(sim::parse_system_json(file + "}", "f.json").sync_jitter_s == 0);
  CHECK(sim::parse_system_json(file + R"(, "sync_jitter_us": 250})", "f.json").sync_jitter_s == Approx(250e-6));
  CHECK_THROWS_WITH(sim::parse_system_json(file + R"(, "sync_jitter_us": -3})", "f.json"),
                    Catch::Contains("sync_jitter_us"));
}

TEST_CASE("a system file's compute_jitter is optional and below 1") {
  const std::string& file = mactor::test::minimal_system_json;
  CHECK(sim::parse_system_json(file + "}", "f.json").compute_jitter == 0);
  CHECK(sim::parse_system_json(file + R"(, "compute_jitter": 0.03})", "f.json").compute_jitter == 0.03);
  CHECK_THROWS_WITH(sim::parse_system_json(file + R"(, "compute_jitter": 1.5})", "f.json"),
                    Catch::Contains("compute_jitter"));
}
