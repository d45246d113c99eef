// Every layout in a grid of tp, cp, pp, vp, uneven stages, recompute and the distributed
// optimizer simulates without deadlock: each rank runs every forward and backward of its chunks
// once, the bubble is a share, and on an ideal machine the compute adds up to Megatron's FLOPs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/simulation.hpp"

namespace sim = mactor::simulate;

namespace {

std::vector<std::vector<std::string>> layouts() {
  std::vector<std::vector<std::string>> out;
  for (const char* tp : {"1", "2"})
    for (const char* cp : {"1", "2"})
      for (const char* pp : {"1", "2", "4"})
        for (const char* stage : {"", "--num-layers-per-virtual-pipeline-stage", "--decoder-first-pipeline-num-layers"})
          for (const char* memory : {"", "--use-distributed-optimizer", "--recompute-activations"}) {
            std::vector<std::string> flags = {"--tensor-model-parallel-size", tp, "--context-parallel-size", cp,
                                              "--pipeline-model-parallel-size", pp};
            if (std::string(stage) == "--num-layers-per-virtual-pipeline-stage") flags.insert(flags.end(), {stage, "1"});
            if (std::string(stage) == "--decoder-first-pipeline-num-layers") flags.insert(flags.end(), {stage, "2"});
            if (*memory) flags.push_back(memory);
            if (std::string(tp) == "2") flags.push_back("--sequence-parallel");
            out.push_back(flags);
          }
  return out;
}

std::string joined(const std::vector<std::string>& flags) {
  std::string out;
  for (const auto& f : flags) out += f + " ";
  return out;
}

}  // namespace

TEST_CASE("a grid of layouts simulates every op once with Megatron's FLOPs on an ideal machine") {
  const double peak = 1e15;
  int simulated = 0;
  for (const auto& layout : layouts()) {
    std::vector<std::string> flags = {"--num-layers", "8", "--hidden-size", "256", "--num-attention-heads", "8",
                                      "--seq-length", "256", "--max-position-embeddings", "256", "--micro-batch-size", "1",
                                      "--global-batch-size", "16", "--vocab-size", "1000", "--bf16", "--train-iters", "1",
                                      "--lr", "1e-4"};
    flags.insert(flags.end(), layout.begin(), layout.end());
    const auto r = mactor::config::resolve(flags, "test", {0, 16}, [](std::string_view) { return false; });
    if (r.exit_status) continue;  // Megatron refuses this combination
    INFO(joined(layout));
    const auto s = sim::simulate_config(r.args, sim::ideal_system(peak), false);
    const int per_rank = s.shape.num_microbatches * s.shape.virtual_pipeline_model_parallel_size;
    double busy = 0;
    for (const auto& rank : s.iteration.ranks) {
      CHECK(rank.pipeline.forwards == per_rank);
      CHECK(rank.pipeline.backwards == per_rank);
      CHECK(rank.bubble_fraction >= 0);
      CHECK(rank.bubble_fraction < 1);
      CHECK(rank.pipeline.peak_activation_bytes > 0);
      busy += rank.pipeline.busy_s;
    }
    CHECK(s.iteration.iteration_s >= s.iteration.pipeline_makespan_s);
    if (!r.args.training.recompute_granularity) {
      const auto& d = r.args.distributed;
      const double shards = static_cast<double>(d.tensor_model_parallel_size * d.context_parallel_size * r.args.derived.data_parallel_size);
      CHECK(busy * shards * peak == Approx(s.costs.model_flops_per_iteration).epsilon(1e-9));
    }
    ++simulated;
  }
  CHECK(simulated >= 60);
}
